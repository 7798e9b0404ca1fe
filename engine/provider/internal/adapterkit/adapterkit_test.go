package adapterkit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
)

func TestLostAnswers(t *testing.T) {
	secret := "https://x.test/order?signature=abc"
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"a lost write may have been done", adapterkit.OpPlace.Lost(504, -1007, nil), provider.ErrUnknown},
		{"a lost cancel too", adapterkit.OpCancel.Lost(0, 0, nil), provider.ErrUnknown},
		{"a lost read is unavailable", adapterkit.OpRead.Lost(0, 0, nil), provider.ErrUnavailable},
		{"another kind is a read", adapterkit.Op("login").Lost(0, 0, nil), provider.ErrUnavailable},
		{"a write sent and lost", (&adapterkit.SendError{Provider: "p", Sent: true, Err: io.EOF}).Mapped(adapterkit.OpReplace), provider.ErrUnknown},
		{"a write never sent", (&adapterkit.SendError{Provider: "p", Err: io.EOF}).Mapped(adapterkit.OpPlace), provider.ErrUnavailable},
		{"a read sent and lost", (&adapterkit.SendError{Provider: "p", Sent: true, Err: io.EOF}).Mapped(adapterkit.OpRead), provider.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("%v is not %v", tc.err, tc.want)
			}
		})
	}
	var unk *provider.Unknown
	if err := adapterkit.OpPlace.Lost(504, -1007, nil); !errors.As(err, &unk) || unk.Op != "place" || unk.Status != 504 || unk.Code != -1007 {
		t.Fatalf("the unknown keeps op, status and code: %+v", err)
	}
	err := (&adapterkit.SendError{Provider: "p", Sent: true, Err: &url.Error{Op: "Post", URL: secret, Err: io.EOF}}).Mapped(adapterkit.OpPlace)
	if strings.Contains(err.Error(), "signature") || !errors.Is(err, io.EOF) {
		t.Fatalf("the cause is cleaned yet kept: %v", err)
	}
	if got := (&adapterkit.SendError{Provider: "binance", Sent: true}).Error(); got != "binance: answer lost after sending" {
		t.Fatalf("sent: %q", got)
	}
	if got := (&adapterkit.SendError{Provider: "binance"}).Error(); got != "binance: not sent" {
		t.Fatalf("not sent: %q", got)
	}
}

func TestHeaders(t *testing.T) {
	h := http.Header{"Retry-After": {" 7 "}}
	h["x-mbx-used-weight-1m"] = []string{"2400"} // not canonical: as a test server may set it
	if n, ok := adapterkit.HeaderInt(h, "X-Mbx-Used-Weight-1m"); !ok || n != 2400 {
		t.Errorf("weight %d %v", n, ok)
	}
	if d := adapterkit.RetryAfter(h, time.Minute); d != 7*time.Second {
		t.Errorf("retry after %v", d)
	}
	if d := adapterkit.RetryAfter(http.Header{"Retry-After": {"soon"}}, time.Minute); d != time.Minute {
		t.Errorf("unreadable retry after %v", d)
	}
	if d := adapterkit.RetryAfter(nil, time.Second); d != time.Second {
		t.Errorf("no headers %v", d)
	}
	// A number that would overflow a duration is a week, never a negative
	// or wrapped wait that lets the next request through at once.
	for _, v := range []string{"9223372036854775807", "99999999999"} {
		if d := adapterkit.RetryAfter(http.Header{"Retry-After": {v}}, time.Second); d != 7*24*time.Hour {
			t.Errorf("Retry-After %s read as %v", v, d)
		}
	}
	a, b := time.Unix(10, 0), time.Unix(20, 0)
	if !adapterkit.Later(a, b).Equal(b) || !adapterkit.Later(b, a).Equal(b) {
		t.Error("Later")
	}
	if adapterkit.Backoff(20*time.Second) != 30*time.Second || adapterkit.Backoff(time.Second) != 2*time.Second {
		t.Error("Backoff")
	}
}

func TestRedial(t *testing.T) {
	ctx := context.Background()
	var waits []time.Time
	start := time.Now()
	ok := adapterkit.Redial(ctx, nil, 10*time.Millisecond, func() error {
		waits = append(waits, time.Now())
		if len(waits) < 3 {
			return errors.New("refused")
		}
		return nil
	}, nil)
	if !ok || len(waits) != 3 {
		t.Fatalf("redial: %v after %d dials", ok, len(waits))
	}
	if d := waits[2].Sub(start); d < 70*time.Millisecond { // 10 + 20 + 40 ms
		t.Fatalf("the waits did not double: %v", d)
	}

	final := errors.New("not entitled")
	n := 0
	if adapterkit.Redial(ctx, nil, time.Millisecond, func() error { n++; return final }, func(err error) bool { return errors.Is(err, final) }) || n != 1 {
		t.Fatalf("a final error: %d dials", n)
	}

	closed := make(chan struct{})
	close(closed)
	if adapterkit.Redial(ctx, closed, time.Hour, func() error { t.Fatal("dialed after close"); return nil }, nil) {
		t.Fatal("redialed after close")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if adapterkit.Redial(cctx, nil, time.Millisecond, func() error { t.Fatal("dialed after cancel"); return nil }, nil) {
		t.Fatal("redialed after cancel")
	}
}

func TestGoEndsWithTheSession(t *testing.T) {
	var wg sync.WaitGroup
	closed := make(chan struct{})
	out := make(chan int)
	adapterkit.Go(&wg, context.Background(), closed, func(ctx context.Context) {
		defer close(out)
		for i := 0; adapterkit.Send(ctx, out, i); i++ {
		}
	})
	if v := <-out; v != 0 {
		t.Fatalf("first %d", v)
	}
	close(closed)
	wg.Wait()
	for range out {
	}
}

func TestCheckURLs(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{adapterkit.CheckHTTP("p", "RestURL", ""), ""},
		{adapterkit.CheckHTTP("p", "RestURL", "https://x.test"), ""},
		{adapterkit.CheckHTTP("p", "RestURL", "http://127.0.0.1:1"), ""},
		{adapterkit.CheckHTTP("p", "RestURL", "wss://x.test"), "p: RestURL must be an http(s) address"},
		{adapterkit.CheckWS("p", "WSURL", "wss://x.test/ws"), ""},
		{adapterkit.CheckWS("p", "WSURL", "ws://127.0.0.1:1"), ""},
		{adapterkit.CheckWS("p", "WSURL", "https://x.test"), "p: WSURL must be a ws(s) address"},
	} {
		got := ""
		if tc.err != nil {
			got = tc.err.Error()
		}
		if got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
