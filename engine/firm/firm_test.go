package firm_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/firm"
	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
	evidem "github.com/svc/engine/events/idem"
)

var t0 = time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)

type step struct {
	cmd         commands.Command
	at          time.Duration // after t0
	key, digest string        // an Idempotency-Key and its request's digest: a venue-door write
}

func run(t *testing.T, given []step, when step) (*firm.State, []events.Event, error) {
	t.Helper()
	s := firm.New("f")
	do := func(i int, st step) ([]events.Event, error) {
		id := ulid.MustParse("01J00000000000000000000000")
		id[15] = byte(i)
		if err := st.cmd.Validate(); err != nil {
			return nil, err
		}
		return firm.Decide(s, commands.Envelope{ID: id, At: t0.Add(st.at), Key: st.key, Digest: st.digest, Cmd: st.cmd})
	}
	for i, st := range given {
		evs, err := do(i, st)
		if err != nil {
			t.Fatalf("given %d: %v", i, err)
		}
		for _, e := range evs {
			s = firm.Apply(s, e)
		}
	}
	evs, err := do(99, when)
	return s, evs, err
}

func hook(id string) step {
	return step{cmd: &firmcmd.RegisterWebhook{ID: id, URL: "https://h.example/" + id}}
}

func reg(id, email string) step {
	return step{cmd: &firmcmd.CreateRegistration{ID: id, Email: email}}
}

const day = 24 * time.Hour

func TestFirmDecisions(t *testing.T) {
	cases := []struct {
		name     string
		given    []step
		when     step
		wantCode string
		want     string // fmt of the event types
	}{
		{name: "a sixth endpoint", given: []step{hook("a"), hook("b"), hook("c"), hook("d"), hook("e")}, when: hook("f"), wantCode: "webhook_limit_reached"},
		{name: "a fifth after a removal", given: []step{hook("a"), hook("b"), hook("c"), hook("d"), hook("e"), {cmd: &firmcmd.RemoveWebhook{ID: "a"}}}, when: hook("f"), want: "[firm.webhook_registered.v1]"},
		{name: "the same url twice", given: []step{hook("a")}, when: step{cmd: &firmcmd.RegisterWebhook{ID: "b", URL: "https://h.example/a"}}, wantCode: "webhook_exists"},
		{name: "a plain http url", when: step{cmd: &firmcmd.RegisterWebhook{ID: "a", URL: "http://h.example/a"}}, wantCode: "invalid_request"},
		{name: "removing an unknown endpoint", when: step{cmd: &firmcmd.RemoveWebhook{ID: "x"}}, wantCode: "not_found"},
		{name: "removing twice", given: []step{hook("a"), {cmd: &firmcmd.RemoveWebhook{ID: "a"}}}, when: step{cmd: &firmcmd.RemoveWebhook{ID: "a"}}, want: "[]"},
		{name: "a registration", when: reg("r1", "T@Example.com"), want: "[firm.registration_created.v1]"},
		{name: "sent again while pending refreshes", given: []step{reg("r1", "t@example.com")}, when: step{cmd: &firmcmd.CreateRegistration{ID: "r2", Email: "t@example.com"}, at: day}, want: "[firm.registration_refreshed.v1]"},
		{name: "sent again when expired refreshes", given: []step{reg("r1", "t@example.com")}, when: step{cmd: &firmcmd.CreateRegistration{ID: "r2", Email: "t@example.com"}, at: 31 * day}, want: "[firm.registration_refreshed.v1]"},
		{name: "sent again after a revoke makes a new one", given: []step{reg("r1", "t@example.com"), {cmd: &firmcmd.RevokeRegistration{ID: "r1"}}}, when: reg("r2", "t@example.com"), want: "[firm.registration_created.v1]"},
		{name: "a link by the matching email", given: []step{reg("r1", "t@example.com")}, when: step{cmd: &firmcmd.LinkRegistration{ID: "r1", Email: "T@example.com", Verified: true, TraderID: "u1"}}, want: "[firm.registration_linked.v1]"},
		{name: "a link by an unverified email", given: []step{reg("r1", "t@example.com")}, when: step{cmd: &firmcmd.LinkRegistration{ID: "r1", Email: "t@example.com", TraderID: "u1"}}, wantCode: "email_unverified"},
		{name: "a link by another email", given: []step{reg("r1", "t@example.com")}, when: step{cmd: &firmcmd.LinkRegistration{ID: "r1", Email: "x@example.com", Verified: true, TraderID: "u1"}}, wantCode: "not_found"},
		{name: "a link after expiry", given: []step{reg("r1", "t@example.com")}, when: step{cmd: &firmcmd.LinkRegistration{ID: "r1", Email: "t@example.com", Verified: true, TraderID: "u1"}, at: 30 * day}, wantCode: "registration_expired"},
		{name: "a link after a revoke", given: []step{reg("r1", "t@example.com"), {cmd: &firmcmd.RevokeRegistration{ID: "r1"}}}, when: step{cmd: &firmcmd.LinkRegistration{ID: "r1", Email: "t@example.com", Verified: true, TraderID: "u1"}}, wantCode: "registration_revoked"},
		{name: "a link twice by the same trader", given: []step{reg("r1", "t@example.com"), {cmd: &firmcmd.LinkRegistration{ID: "r1", Email: "t@example.com", Verified: true, TraderID: "u1"}}}, when: step{cmd: &firmcmd.LinkRegistration{ID: "r1", Email: "t@example.com", Verified: true, TraderID: "u1"}}, want: "[]"},
		{name: "a revoke of a linked one", given: []step{reg("r1", "t@example.com"), {cmd: &firmcmd.LinkRegistration{ID: "r1", Email: "t@example.com", Verified: true, TraderID: "u1"}}}, when: step{cmd: &firmcmd.RevokeRegistration{ID: "r1"}}, wantCode: "registration_linked"},
		{name: "a bad email", when: reg("r1", "not an email"), wantCode: "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, evs, err := run(t, c.given, c.when)
			if c.wantCode != "" {
				var ref *commands.Refusal
				if !errors.As(err, &ref) || string(ref.Code) != c.wantCode || len(evs) != 0 {
					t.Fatalf("want %s, got %v %v", c.wantCode, err, evs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, e := range evs {
				types = append(types, e.Type())
			}
			if got := fmt.Sprint(types); got != c.want {
				t.Fatalf("events %s, want %s", got, c.want)
			}
		})
	}
}

// keyed is st through the venue door, under Idempotency-Key key with a request digest.
func keyed(st step, key, digest string) step {
	st.key, st.digest = key, digest
	return st
}

func ping(id string) *firmcmd.TestWebhook {
	code := 200
	return &firmcmd.TestWebhook{WebhookID: id, Outcome: &firmcmd.PingOutcome{Status: "succeeded", ResponseCode: &code}}
}

// The venue door's webhook writes record their Idempotency-Key with the
// answer in the commit; a repeat answers it again, another request under it
// is 409, a refusal records nothing.
func TestKeyedWebhookWrites(t *testing.T) {
	remove := func(id string) step { return step{cmd: &firmcmd.RemoveWebhook{ID: id}} }
	cases := []struct {
		name      string
		given     []step
		when      step
		wantTypes string // recorded
		wantBody  string // of the KeyUsed, or of the replay when wantTypes is ""
		wantCode  string
	}{
		{name: "a keyed registration", when: keyed(hook("a"), "k1", "d1"), wantTypes: "[firm.webhook_registered.v1 idempotency.key_used.v1]",
			wantBody: `{"webhook":{"createdAt":"2026-11-02T14:00:00Z","eventTypes":[],"id":"a","url":"https://h.example/a"}}`},
		{name: "a repeat answers the first answer", given: []step{keyed(hook("a"), "k1", "d1")}, when: keyed(hook("b"), "k1", "d1"),
			wantBody: `{"webhook":{"createdAt":"2026-11-02T14:00:00Z","eventTypes":[],"id":"a","url":"https://h.example/a"}}`},
		{name: "the same key with another request", given: []step{keyed(hook("a"), "k1", "d1")}, when: keyed(hook("b"), "k1", "d2"), wantCode: "idempotency_conflict"},
		{name: "a refused registration records nothing", given: []step{hook("a")}, when: keyed(step{cmd: &firmcmd.RegisterWebhook{ID: "b", URL: "https://h.example/a"}}, "k1", "d1"), wantCode: "webhook_exists"},
		{name: "a keyed removal", given: []step{hook("a")}, when: keyed(remove("a"), "k1", "d1"), wantTypes: "[firm.webhook_removed.v1 idempotency.key_used.v1]",
			wantBody: `{"webhook":{"createdAt":"2026-11-02T14:00:00Z","eventTypes":[],"id":"a","url":"https://h.example/a"}}`},
		{name: "a keyed removal of a removed endpoint is not found", given: []step{hook("a"), remove("a")}, when: keyed(remove("a"), "k1", "d1"), wantCode: "not_found"},
		{name: "a removal repeated after it removed", given: []step{hook("a"), keyed(remove("a"), "k1", "d1")}, when: keyed(remove("a"), "k1", "d1"),
			wantBody: `{"webhook":{"createdAt":"2026-11-02T14:00:00Z","eventTypes":[],"id":"a","url":"https://h.example/a"}}`},
		{name: "a test ping's outcome is kept", given: []step{hook("a")}, when: keyed(step{cmd: ping("a")}, "k1", "d1"), wantTypes: "[idempotency.key_used.v1]",
			wantBody: `{"delivery":{"status":"succeeded","responseCode":200,"error":null}}`},
		{name: "a test ping of an unknown endpoint", when: keyed(step{cmd: ping("a")}, "k1", "d1"), wantCode: "not_found"},
		{name: "the partner route's registration records no key", when: keyed(hook("a"), "k1", ""), wantTypes: "[firm.webhook_registered.v1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, evs, err := run(t, c.given, c.when)
			var ref *commands.Refusal
			var replay *commands.Replay
			switch {
			case c.wantCode != "":
				if !errors.As(err, &ref) || string(ref.Code) != c.wantCode || len(evs) != 0 {
					t.Fatalf("want %s, got %v %v", c.wantCode, evs, err)
				}
			case c.wantTypes == "":
				if !errors.As(err, &replay) || replay.Status != 200 || string(replay.Body) != c.wantBody {
					t.Fatalf("want the replay of %s, got %v %v", c.wantBody, evs, err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				var types []string
				for _, e := range evs {
					types = append(types, e.Type())
					if k, ok := e.(evidem.KeyUsed); ok && (k.Status != 200 || string(k.Body) != c.wantBody) {
						t.Fatalf("key used %+v, body %s", k, k.Body)
					}
				}
				if fmt.Sprint(types) != c.wantTypes {
					t.Fatalf("recorded %v, want %s", types, c.wantTypes)
				}
			}
		})
	}
}

func TestRegistrationStatusFollowsTheClock(t *testing.T) {
	s, _, _ := run(t, []step{reg("r1", "t@example.com")}, step{cmd: &firmcmd.RevokeRegistration{ID: "nosuch"}})
	r := s.Registrations["r1"]
	if r.Status(t0) != firm.StatusPending || r.Status(t0.Add(30*day)) != firm.StatusExpired {
		t.Fatalf("statuses %s %s", r.Status(t0), r.Status(t0.Add(30*day)))
	}
}

func TestEveryFirmEventHasAType(t *testing.T) {
	for name, f := range evfirm.Registry() {
		e, err := f.Decode([]byte(`{}`))
		if err != nil || e.Type() != name {
			t.Fatalf("%s decodes as %v (%v)", name, e, err)
		}
	}
}

// Every firm event, decided live, then written to the log in both encodings
// and read back, rebuilds the whole live state.
func TestReplayRebuildsTheSameState(t *testing.T) {
	// The firm's events and the Idempotency-Key record of its venue-door writes.
	registry := events.Merge(evfirm.Registry(), evidem.Registry())
	r := enginetest.NewReplay(t, enginetest.Core[*firm.State]{
		New:      func() *firm.State { return firm.New("f") },
		Decide:   firm.Decide,
		Apply:    firm.Apply,
		Registry: registry,
	})
	at, n := t0, 0
	seen := map[string]bool{}
	doKeyed := func(key, digest string, cmd commands.Command) {
		t.Helper()
		if err := cmd.Validate(); err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
		n++
		id := ulid.MustParse("01J00000000000000000000000")
		id[15] = byte(n)
		for _, e := range r.Do(commands.Envelope{ID: id, At: at, Key: key, Digest: digest, Principal: events.Principal{TenantID: "f"}, Cmd: cmd}) {
			seen[e.Type()] = true
		}
	}
	do := func(cmd commands.Command) { t.Helper(); doKeyed(fmt.Sprint("k", n+1), "", cmd) }
	do(&firmcmd.RegisterWebhook{ID: "w1", URL: "https://h.example/w1", EventTypes: []string{"risk.locked", "account.reset"}})
	do(&firmcmd.RegisterWebhook{ID: "w2", URL: "https://h.example/w2"})
	do(&firmcmd.RemoveWebhook{ID: "w1"})
	doKeyed("venue-1", "d1", &firmcmd.RegisterWebhook{ID: "w3", URL: "https://h.example/w3"})
	doKeyed("venue-2", "d2", ping("w3"))
	doKeyed("venue-3", "d3", &firmcmd.RemoveWebhook{ID: "w3"})
	do(&firmcmd.CreateRegistration{ID: "g1", Email: "Trader@Example.com", AccountNumber: "A1", LoginName: "trader", Provider: "p"})
	at = at.Add(time.Hour)
	do(&firmcmd.CreateRegistration{ID: "g1b", Email: "trader@example.com", AccountNumber: "A1", LoginName: "trader", Provider: "p"}) // refreshes g1
	do(&firmcmd.CreateRegistration{ID: "g2", Email: "other@example.com", AccountNumber: "A2", Provider: "p"})
	do(&firmcmd.RevokeRegistration{ID: "g2"})
	do(&firmcmd.LinkRegistration{ID: "g1", Email: "trader@example.com", Verified: true, TraderID: "t-1"})
	do(&firmcmd.CreateRegistration{ID: "g3", Email: "late@example.com", AccountNumber: "A3", Provider: "p"})
	at = at.Add(firm.RegistrationLifetime + day)
	do(&firmcmd.CreateRegistration{ID: "g3b", Email: "late@example.com", AccountNumber: "A3", Provider: "p"}) // refreshes the expired g3

	for name := range registry {
		if !seen[name] && name != (evfirm.DeliveryAttempted{}).Type() && name != (evfirm.DeliveryStarted{}).Type() { // the delivery ledger is not the firm aggregate's
			t.Errorf("the script records no %s: add a command that does", name)
		}
	}
	r.Check()
}
