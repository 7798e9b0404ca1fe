package providers_test

import (
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/engine/account"
	evacct "github.com/svc/engine/events/account"
)

// waitingLeg is a linked account's state whose bracket has a stop leg
// that did not reach the provider, placed again at at.
func waitingLeg(t *testing.T, at time.Time) *account.State {
	t.Helper()
	s := intended(t)
	s.Brackets = map[string]*evacct.Bracket{"b1": {ID: "b1", State: evacct.BracketActive, Instrument: "BTCUSDT", Side: "long",
		Legs: []evacct.BracketLeg{{ID: "l1", Kind: evacct.LegStop, State: evacct.LegWorking, RetryAt: &at, Retries: 1}}}}
	return s
}

// A bracket leg that did not reach the provider is placed again by the
// owner: RetryExits at its retry time; and at once (Now) once a complete
// reading at a start shows the provider answering again. A node that does
// not own the account sends neither.
func TestTheOwnerPlacesAWaitingLegAgain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		resumed bool
		owns    bool
		due     time.Duration
		want    []bool // the RetryExits recorded, by Now
	}{
		{"at its retry time", false, true, 150 * time.Millisecond, []bool{false}},
		{"at once after a start's reading", true, true, time.Hour, []bool{true}},
		{"never by a node that does not own it", false, false, 50 * time.Millisecond, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []bool
			var at time.Time
			r := quietReactor(&fakeSess{}, tc.owns, func(c commands.Command) {
				if c, ok := c.(*providercmd.RetryExits); ok {
					mu.Lock()
					got = append(got, c.Now)
					if at.IsZero() {
						at = time.Now()
					}
					mu.Unlock()
				}
			})
			defer r.Close()
			began := time.Now()
			s := waitingLeg(t, began.Add(tc.due))
			if tc.resumed {
				r.Resume("a1", s)
			} else {
				r.Track("a1", s)
			}
			time.Sleep(tc.due%time.Hour + 400*time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			if len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
				t.Fatalf("RetryExits recorded %v, want %v", got, tc.want)
			}
			if !tc.resumed && len(got) == 1 && at.Before(began.Add(tc.due)) {
				t.Fatalf("sent %v before its retry time", began.Add(tc.due).Sub(at))
			}
		})
	}
}
