package webhook

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine/egress"
)

func TestScheduleIsSixAttemptsOverAboutNineHours(t *testing.T) {
	if len(DefaultBackoff)+1 != Attempts || Attempts != 6 {
		t.Fatalf("%d waits for %d attempts", len(DefaultBackoff), Attempts)
	}
	var total time.Duration
	for i, d := range DefaultBackoff {
		if d <= 0 || (i > 0 && d <= DefaultBackoff[i-1]) {
			t.Fatalf("wait %d is %v: not growing", i, d)
		}
		total += d
	}
	if total < 8*time.Hour+45*time.Minute || total > 9*time.Hour+15*time.Minute {
		t.Fatalf("the last attempt comes %v after the first, want about 9 hours", total)
	}
	base := Config{Log: nil, Key: make([]byte, 16), Now: time.Now}
	for _, b := range [][]time.Duration{make([]time.Duration, 6), {1, 2, 3, 4, 0}} {
		c := base
		c.Backoff = b
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Backoff") {
			t.Fatalf("backoff %v: %v", b, err)
		}
	}
}

type panicky struct{ msg string }

func (p panicky) RoundTrip(*http.Request) (*http.Response, error) { panic(p.msg) }

// TestAPanicInTheSenderIsAFailedAttempt: the process lives, the attempt is a
// failure, and the log shows neither the endpoint's URL nor its secret.
func TestAPanicInTheSenderIsAFailedAttempt(t *testing.T) {
	key := []byte("0123456789abcdef")
	target := "https://hooks.example.com/in?token=tok_secret"
	secret := Secret(key, "f", "w1")
	var logged bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	r := &Reactor{cfg: Config{Key: key, Now: time.Now, Timeout: time.Second},
		client: &http.Client{Transport: panicky{"boom at " + target + " with " + secret}}}
	out := r.safeSend(context.Background(), "f", "w1", target, "ping", 1, []byte(`{}`))
	if out.Status != "failed" || out.Error == nil || out.ResponseCode != nil {
		t.Fatalf("outcome %+v", out)
	}
	if !strings.Contains(logged.String(), "panicked") || strings.Contains(logged.String(), "tok_secret") || strings.Contains(logged.String(), secret) {
		t.Fatalf("log %s", logged.String())
	}
}

// TestARefusedDialSaysWhichRuleNotWhichAddress: the delivery log names the
// rule and never the address a name resolved to.
func TestARefusedDialSaysWhichRuleNotWhichAddress(t *testing.T) {
	err := egress.Control(context.Background(), "tcp", "10.1.2.3:443", nil)
	msg := describe(&wrapped{err}, time.Second)
	if !strings.Contains(msg, "not public (private)") || strings.Contains(msg, "10.1.2.3") {
		t.Fatalf("%q", msg)
	}
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "dial tcp 10.1.2.3:443: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }
