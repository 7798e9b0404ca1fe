package tenant

import (
	"time"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/events"
	evtenant "github.com/svc/engine/events/tenant"
)

// Live is a user's live trading switch as its commits leave it: Set is
// false until the user sets it (the engine's default holds until then).
type Live struct {
	Set bool
	On  bool
	At  time.Time // when the user last set it
}

// LiveTrading answers whether orders may reach the user's provider
// accounts, given the engine's default for a user who never set it.
func (s *State) LiveTrading(byDefault bool) bool {
	if !s.Live.Set {
		return byDefault
	}
	return s.Live.On
}

func applyLive(s *State, e evtenant.LiveTradingSet) {
	s.Live = Live{Set: true, On: e.On, At: e.At}
}

// decideLive sets the switch; setting it to what it is records nothing.
func decideLive(s *State, env commands.Envelope, c *tenantcmd.SetLiveTrading) ([]events.Event, error) {
	if s.Kind != "user" {
		return nil, commands.Refuse(commands.CodePermissionDenied, "live trading is a user's switch", nil)
	}
	if s.Live.Set && s.Live.On == c.On {
		return nil, nil
	}
	return []events.Event{evtenant.LiveTradingSet{On: c.On, At: env.At}}, nil
}
