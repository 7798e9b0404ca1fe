package tenant_test

import (
	"errors"
	"testing"
	"time"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine/tenant"
	"github.com/svc/engine/events"
	evtenant "github.com/svc/engine/events/tenant"
)

// The live trading switch: the engine's default until the user sets it,
// then the user's last setting; setting it to what it is records nothing;
// only a user has one.
func TestLiveTradingSwitch(t *testing.T) {
	at := time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)
	user := func() *tenant.State {
		s := tenant.New("u1")
		return tenant.Apply(s, evtenant.Created{TenantID: "u1", Kind: "user", Email: "ann@example.com", At: at})
	}
	set := func(s *tenant.State, on bool) []events.Event {
		t.Helper()
		evs, err := tenant.Decide(s, commands.Envelope{At: at, Cmd: &tenantcmd.SetLiveTrading{On: on}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			tenant.Apply(s, e)
		}
		return evs
	}

	s := user()
	if !s.LiveTrading(true) || s.LiveTrading(false) {
		t.Fatal("a user who never set the switch has the engine's default")
	}
	if evs := set(s, false); len(evs) != 1 || evs[0] != (evtenant.LiveTradingSet{On: false, At: at}) {
		t.Fatalf("switching off records %v", evs)
	}
	if s.LiveTrading(true) {
		t.Fatal("a user who switched off is off whatever the default")
	}
	if evs := set(s, false); len(evs) != 0 {
		t.Fatalf("switching off again records %v", evs)
	}
	if evs := set(s, true); len(evs) != 1 || !s.LiveTrading(false) || !s.Live.At.Equal(at) {
		t.Fatalf("switching on records %v and reads %v", evs, s.Live)
	}

	firm := tenant.Apply(tenant.New("f1"), evtenant.Created{TenantID: "f1", Kind: "firm", At: at})
	_, err := tenant.Decide(firm, commands.Envelope{At: at, Cmd: &tenantcmd.SetLiveTrading{On: true}})
	var r *commands.Refusal
	if !errors.As(err, &r) || r.Code != commands.CodePermissionDenied {
		t.Fatalf("a firm's switch: %v", err)
	}
}
