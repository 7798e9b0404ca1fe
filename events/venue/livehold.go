package venue

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file livehold.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// A venue holds live trading off for its traders: every one (Trader empty)
// or one, named by the email the venue registered them by. Its traders are
// the provider accounts linked through a Connect app of the venue's
// organization and those of a trader whose pre-registration by the venue
// was linked, for that registration's provider. While a hold stands the
// order and reverse routes refuse every order on those accounts (403
// feature_disabled, params.heldBy venue), whatever the trader's own switch
// says; paper accounts are never held.

// Actor is who held or released: an owner of the venue's organization
// signed in to the back office (kind owner: their user id and email) or a
// venue key (kind key: its id and name). Never a secret.
type Actor struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// Actor kinds.
const (
	ActorOwner = "owner"
	ActorKey   = "key"
)

// LiveHeld records a hold on live trading: the venue's whole (Trader
// empty) or one trader's. A hold stated again with another reason records
// the new reason. Firm is the venue's firm tenant, which receives the
// webhook.
type LiveHeld struct {
	Trader string    `json:"trader,omitempty"`
	Reason string    `json:"reason"`
	By     Actor     `json:"by"`
	Firm   string    `json:"firm"`
	At     time.Time `json:"at"`
}

// LiveReleased records the end of a hold (Trader as in LiveHeld).
type LiveReleased struct {
	Trader string    `json:"trader,omitempty"`
	By     Actor     `json:"by"`
	Firm   string    `json:"firm"`
	At     time.Time `json:"at"`
}

func (LiveHeld) Type() string     { return "venue.live_held.v1" }
func (LiveReleased) Type() string { return "venue.live_released.v1" }

// liveRegistry lists the hold's event types (merged into Registry).
func liveRegistry() events.Registry {
	return events.Registry{
		LiveHeld{}.Type():     events.Of[LiveHeld](),
		LiveReleased{}.Type(): events.Of[LiveReleased](),
	}
}
