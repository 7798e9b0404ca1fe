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
)

var t0 = time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)

type step struct {
	cmd commands.Command
	at  time.Duration // after t0
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
		return firm.Decide(s, commands.Envelope{ID: id, At: t0.Add(st.at), Cmd: st.cmd})
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
				if !errors.As(err, &ref) || ref.Code != c.wantCode || len(evs) != 0 {
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
	r := enginetest.NewReplay(t, enginetest.Core[*firm.State]{
		New:      func() *firm.State { return firm.New("f") },
		Decide:   firm.Decide,
		Apply:    firm.Apply,
		Registry: evfirm.Registry(),
	})
	at, n := t0, 0
	seen := map[string]bool{}
	do := func(cmd commands.Command) {
		t.Helper()
		if err := cmd.Validate(); err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
		n++
		id := ulid.MustParse("01J00000000000000000000000")
		id[15] = byte(n)
		for _, e := range r.Do(commands.Envelope{ID: id, At: at, Key: fmt.Sprint("k", n), Principal: events.Principal{TenantID: "f"}, Cmd: cmd}) {
			seen[e.Type()] = true
		}
	}
	do(&firmcmd.RegisterWebhook{ID: "w1", URL: "https://h.example/w1", EventTypes: []string{"risk.locked", "account.reset"}})
	do(&firmcmd.RegisterWebhook{ID: "w2", URL: "https://h.example/w2"})
	do(&firmcmd.RemoveWebhook{ID: "w1"})
	do(&firmcmd.CreateRegistration{ID: "g1", Email: "Trader@Example.com", AccountNumber: "A1", LoginName: "trader", Provider: "p"})
	at = at.Add(time.Hour)
	do(&firmcmd.CreateRegistration{ID: "g1b", Email: "trader@example.com", AccountNumber: "A1", LoginName: "trader", Provider: "p"}) // refreshes g1
	do(&firmcmd.CreateRegistration{ID: "g2", Email: "other@example.com", AccountNumber: "A2", Provider: "p"})
	do(&firmcmd.RevokeRegistration{ID: "g2"})
	do(&firmcmd.LinkRegistration{ID: "g1", Email: "trader@example.com", Verified: true, TraderID: "t-1"})
	do(&firmcmd.CreateRegistration{ID: "g3", Email: "late@example.com", AccountNumber: "A3", Provider: "p"})
	at = at.Add(firm.RegistrationLifetime + day)
	do(&firmcmd.CreateRegistration{ID: "g3b", Email: "late@example.com", AccountNumber: "A3", Provider: "p"}) // refreshes the expired g3

	for name := range evfirm.Registry() {
		if !seen[name] && name != (evfirm.DeliveryAttempted{}).Type() { // the delivery ledger is not the firm aggregate's
			t.Errorf("the script records no %s: add a command that does", name)
		}
	}
	r.Check()
}
