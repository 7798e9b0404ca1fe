package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/svc/engine/gateway/httpx"
)

func TestLimiterTableStaysBounded(t *testing.T) {
	a := New(Config{RatePerSecond: 1, Burst: 3}, nil)
	hot := "origin:https://hot.example"
	for i := 0; i < 3; i++ {
		if _, ok := a.allow(hot, 1, 3); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	if wait, ok := a.allow(hot, 1, 3); ok || wait < 1 {
		t.Fatalf("over the burst: ok %v, wait %d", ok, wait)
	}
	// Random origins (or keys) each make a limiter; the table never passes its bound.
	for i := 0; i < 5*maxLimiters; i++ {
		a.allow(fmt.Sprintf("origin:https://%d.example", i), 1, 3)
		if n := len(a.limiters); n > maxLimiters {
			t.Fatalf("%d limiters after %d credentials", n, i+1)
		}
	}
}

func TestStreamSlotsPerCredential(t *testing.T) {
	a := New(Config{}, nil)
	key := httpx.Principal{Kind: "trading"}
	key.KeyID = "k1"
	origin := httpx.Principal{Kind: "origin", Origin: "https://a.example"}
	var releases []func()
	for i := 0; i < DefaultMaxStreams; i++ {
		release, err := a.openStream(credential(key))
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		releases = append(releases, release)
	}
	_, err := a.openStream(credential(key))
	var he *httpx.Error
	if !errors.As(err, &he) || he.Status != http.StatusTooManyRequests || he.Code != "too_many_streams" || he.RetryAfter != StreamRetryAfter {
		t.Fatalf("stream %d: %#v", DefaultMaxStreams+1, err)
	}
	if _, err := a.openStream(credential(origin)); err != nil {
		t.Fatalf("another credential: %v", err)
	}
	releases[0]()
	releases[0]() // a second release gives nothing back
	if n := a.Streams(key); n != DefaultMaxStreams-1 {
		t.Fatalf("%d open after a release", n)
	}
	if _, err := a.openStream(credential(key)); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if _, err := a.openStream(credential(key)); err == nil {
		t.Fatal("the double release freed a second slot")
	}
	for _, r := range releases {
		r()
	}
	if n := a.Streams(key); n != 1 {
		t.Fatalf("%d open, want 1", n)
	}
}

// A key's digest is the hex SHA-256 of the key, whatever its length.
func TestDigestIsTheHexSHA256OfTheKey(t *testing.T) {
	for key, want := range map[string]string{
		"abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"":    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	} {
		if got := Digest(key); got != want {
			t.Fatalf("Digest(%q) = %s, want %s", key, got, want)
		}
	}
	long := strings.Repeat("k", 300) // past the stack buffer
	sum := sha256.Sum256([]byte(long))
	if got, want := Digest(long), hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("Digest of a 300-byte key = %s, want %s", got, want)
	}
}
