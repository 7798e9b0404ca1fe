package auth_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/gateway/auth"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// A session cookie verifies under the key that signed it, also once a newer
// key signs (rotation keeps the old key for verification), and never after
// its absolute end, after its idle time, or once tampered with.
func TestSessionCookies(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	old, err := auth.NewSessions(true, key(1))
	if err != nil {
		t.Fatal(err)
	}
	c := auth.Claims{SessionID: "ses_1", UserID: "usr_1", Start: now.Unix(), Seen: now.Unix(), Expires: now.Add(auth.SessionAbsolute).Unix()}
	v := old.Sign(c)
	rotated, _ := auth.NewSessions(true, key(2), key(1))
	onlyNew, _ := auth.NewSessions(true, key(2))
	if got, ok := rotated.Verify(v, now.Add(time.Hour)); !ok || got != c {
		t.Fatalf("a rotation logged the session out: %v %+v", ok, got)
	}
	if _, ok := onlyNew.Verify(v, now); ok {
		t.Fatal("a key no longer listed still verifies")
	}
	if _, ok := rotated.Verify(rotated.Sign(c), now); !ok {
		t.Fatal("the new key's cookie")
	}
	if _, ok := old.Verify(v, now.Add(auth.SessionIdle+time.Second)); ok {
		t.Fatal("an idle session verifies")
	}
	c2 := c
	c2.Seen = now.Add(auth.SessionAbsolute - time.Minute).Unix()
	if _, ok := old.Verify(old.Sign(c2), now.Add(auth.SessionAbsolute)); ok {
		t.Fatal("a session past its absolute end verifies")
	}
	parts := strings.Split(v, ".")
	forged := parts[0] + "." + parts[1] + "x." + parts[2]
	if _, ok := old.Verify(forged, now); ok {
		t.Fatal("a tampered cookie verifies")
	}
	if _, err := auth.NewSessions(true, []byte("short")); err == nil {
		t.Fatal("a short key is accepted")
	}
	if ck := old.Cookie(c); !ck.HttpOnly || !ck.Secure || ck.Name != auth.SessionCookie {
		t.Fatalf("cookie %+v", ck)
	}
}
