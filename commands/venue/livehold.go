package venue

import (
	"strings"

	"github.com/svc/engine/commands"
)

// MaxTraderHolds bounds the traders a venue holds live trading off for one
// by one (a hold of the whole venue holds them all).
const MaxTraderHolds = 1000

// Actor is who holds or releases live trading, as the gateway resolved the
// door: a signed-in owner (Owner, with their email) or a venue key (KeyID).
type Actor struct {
	Owner *Owner
	Email string
	KeyID string
}

// HoldLive holds live trading off: for every trader of the venue (Trader
// empty) or for one, named by the email the venue registered them by.
type HoldLive struct {
	Trader string `json:"trader,omitempty"`
	Reason string `json:"reason"`
	By     Actor  `json:"-"`
}

// Validate checks the shape: a reason of 1 to 256 printable characters and,
// when named, a plain email (compared lower-cased).
func (c *HoldLive) Validate() error {
	if err := commands.Identifier("reason", c.Reason, commands.MaxReason); err != nil {
		return err
	}
	return traderOf(&c.Trader)
}

// ReleaseLive ends a hold HoldLive placed (Trader as there). Releasing the
// whole venue leaves the holds of single traders standing.
type ReleaseLive struct {
	Trader string `json:"trader,omitempty"`
	By     Actor  `json:"-"`
}

// Validate checks the shape.
func (c *ReleaseLive) Validate() error { return traderOf(&c.Trader) }

// traderOf checks a named trader and lower-cases it.
func traderOf(t *string) error {
	if *t == "" {
		return nil
	}
	if err := commands.Email("trader", *t); err != nil {
		return err
	}
	*t = strings.ToLower(*t)
	return nil
}
