package enginetest

import (
	"strings"
	"testing"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
)

// Core is an aggregate's pure core: its empty state, Decide, Apply and the
// registry its commits are written with.
type Core[S any] struct {
	New      func() S
	Decide   func(S, commands.Envelope) ([]events.Event, error)
	Apply    func(S, events.Event) S
	Registry events.Registry
}

// Replay drives an aggregate as its mailbox does, keeping the log it writes,
// and checks that replay(log) == live state.
type Replay[S any] struct {
	t    testing.TB
	core Core[S]
	live S
	done int         // commands decided
	logs [2][][]byte // the commits in MessagePack, then in JSON
}

// NewReplay starts a Replay of core from its empty state.
func NewReplay[S any](t testing.TB, core Core[S]) *Replay[S] {
	return &Replay[S]{t: t, core: core, live: core.New()}
}

// Live is the live state: every decision's events applied as decided.
func (r *Replay[S]) Live() S { return r.live }

// Do decides env on the live state, writes the events as one commit (as the
// mailbox does, in both encodings the log may hold), applies them and returns
// them. A refusal or an error fails the test.
func (r *Replay[S]) Do(env commands.Envelope) []events.Event {
	r.t.Helper()
	r.done++
	evs, err := r.core.Decide(r.live, env)
	if err != nil {
		r.t.Fatalf("command %d (%T): %v", r.done, env.Cmd, err)
	}
	if len(evs) > 0 {
		c := events.Commit{CommandID: env.ID.String(), Key: env.Key, Principal: env.Principal, At: env.At, Events: evs}
		for i, reg := range []events.Registry{r.core.Registry, r.core.Registry.WritingJSON()} {
			b, err := reg.Encode(c)
			if err != nil {
				r.t.Fatalf("encode the commit of %T: %v", env.Cmd, err)
			}
			r.logs[i] = append(r.logs[i], b)
		}
	}
	for _, e := range evs {
		r.live = r.core.Apply(r.live, e)
	}
	return evs
}

// Check folds each log, decoded, into a fresh state and fails the test with
// every difference from the live state (Diff: the whole state, decimals and
// times as the log writes them).
func (r *Replay[S]) Check() {
	r.t.Helper()
	for i, name := range []string{"MessagePack", "JSON"} {
		s := r.core.New()
		for n, b := range r.logs[i] {
			c, err := r.core.Registry.Decode(b)
			if err != nil {
				r.t.Fatalf("decode commit %d (%s): %v", n, name, err)
			}
			for _, e := range c.Events {
				s = r.core.Apply(s, e)
			}
		}
		if d := Diff(r.live, s); len(d) > 0 {
			r.t.Errorf("the state rebuilt from the %s log of %d commits is not the live state:\n%s", name, len(r.logs[i]), strings.Join(d, "\n"))
		}
	}
}
