package trading

import (
	"github.com/svc/engine/events"
)

// Terms are what a venue's configuration says for the accounts of one group,
// compiled from the venue's aggregate at one revision: the instruments they
// may trade with each one's quantity limit, an entry halt, the route, the
// stage and its current version, and the commissions fills pay. The engine
// attaches them to every command of an account issued into the group, so the
// account's Decide stays pure and a change takes effect at the account's next
// command, in log order.
type Terms struct {
	VenueID      string
	GroupID      string
	Revision     uint64                    // the venue's revision they were compiled at
	Permitted    map[string]events.Decimal // instrument -> per-order quantity limit (zero: none)
	EntryHalted  bool
	Route        string // "paper", "provider:<id>", or "" (none: venue_route_missing)
	StageID      string
	StageVersion string
	Commissions  []Commission
	// The group's published risk policy in force ("" : none) and its loss limits.
	PolicyID        string
	PolicyVersion   string
	DailyLossLimit  *events.Decimal
	WeeklyLossLimit *events.Decimal
}

// Commission is one charge a fill pays (commands/venue.Commission, compiled).
type Commission struct {
	Name      string
	PerUnit   bool // per unit of quantity; else per order
	Amount    events.Decimal
	RoundTurn bool   // half on each side
	Direction string // open, close or both
}
