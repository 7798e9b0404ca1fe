// Package enginetest holds what the module's tests share: WaitFor, the one
// wait helper (apptest.WaitFor calls it), and Replay, the check that an
// aggregate's log rebuilds its live state. It imports only the standard
// library, commands and events, so any test may use it without an import cycle.
package enginetest

import (
	"testing"
	"time"
)

// poll is how often WaitFor calls its condition.
const poll = 10 * time.Millisecond

// WaitFor calls fn until it returns nil, every poll, and fails t with fn's
// last error once timeout has passed. fn runs at least once, on the calling
// goroutine, which must be the test's (WaitFor calls t.Fatalf).
func WaitFor(t testing.TB, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("condition not met in %v: %v", timeout, err)
		}
		time.Sleep(poll)
	}
}
