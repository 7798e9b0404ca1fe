package account

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file bracket.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Bracket and leg states.
const (
	BracketActive = "active"
	BracketEnded  = "ended"

	LegPreArmed = "pre_armed" // priced and recorded, not resting: the position does not exist yet
	LegWorking  = "working"   // rests as the order named by the leg's id
	LegFilled   = "filled"
	LegCanceled = "canceled"

	LegStop   = "stop"
	LegTarget = "target"
	LegRunner = "runner" // the share no target takes: protected by the stop alone
)

// BracketLeg is one exit of a bracket. Its id is the id of the order it
// rests as once armed; ParentOrderID names the entry while it is pre_armed
// and is empty once the leg protects a position.
type BracketLeg struct {
	ID            string          `json:"id"`
	Kind          string          `json:"kind"`
	State         string          `json:"state"`
	Price         *events.Decimal `json:"price"`           // nil for a runner
	Quantity      events.Decimal  `json:"quantity"`        // what the leg closes, of the quantity armed (planned while pre_armed)
	Share         *events.Decimal `json:"share,omitempty"` // a target's share of the protected quantity
	Filled        events.Decimal  `json:"filled"`          // closed by this leg so far
	ParentOrderID string          `json:"parentOrderId,omitempty"`
	// RetryAt: a provider account's working leg whose order did not reach
	// the provider for a passing reason (unreachable, throttled, never
	// placed) and rests nowhere: it is placed again at this time. Nil
	// otherwise.
	RetryAt *time.Time `json:"retryAt,omitempty"`
	// Retries are the leg's placements in a row that did not reach the
	// provider (the wait before the next doubles with each, up to
	// MaxLegRetryWait); back to zero once one is accepted.
	Retries int `json:"retries,omitempty"`
}

// MaxLegRetryWait is the longest wait before a leg whose order did not
// reach the provider is placed again (the first waits 1 s, then 2, 4 ...).
const MaxLegRetryWait = time.Minute

// Breakeven is a priced breakeven rule: once the touch reaches Trigger the
// stop moves to StopPrice (entry plus the plan's ticks), once.
type Breakeven struct {
	Trigger   events.Decimal `json:"triggerPrice"`
	StopPrice events.Decimal `json:"stopPrice"`
	Done      bool           `json:"done"`
}

// Trailing is a priced trailing rule: from the touch reaching Activation
// (nil: at once) the stop trails Distance behind the best touch seen, moving
// only in the position's favour and only by whole ticks.
type Trailing struct {
	Activation *events.Decimal `json:"activationPrice"`
	Distance   events.Decimal  `json:"distance"`
	Active     bool            `json:"active"`
	Best       *events.Decimal `json:"bestPrice"`
}

// Bracket is a set of exits protecting one entry's or one position's
// quantity: a stop, targets and a runner, with breakeven and trailing rules
// the account's aggregate manages from quotes.
type Bracket struct {
	ID            string         `json:"id"`
	State         string         `json:"state"`
	Instrument    string         `json:"instrument"`
	Side          string         `json:"side"`                   // long or short: the position it protects
	EntryOrderID  string         `json:"entryOrderId,omitempty"` // the resting entry it waits on
	EntryPrice    events.Decimal `json:"entryPrice"`             // the basis of its levels
	Planned       events.Decimal `json:"plannedQuantity"`        // what it will protect when the entry has filled
	Armed         events.Decimal `json:"armedQuantity"`          // what it protects now
	Tick          events.Decimal `json:"tickSize"`
	Lot           events.Decimal `json:"lotStep"`
	PlanID        string         `json:"planId,omitempty"`
	PlanRevision  string         `json:"planRevision,omitempty"`
	ClientOrderID string         `json:"clientOrderId,omitempty"` // the key of the order or protection that opened it
	Legs          []BracketLeg   `json:"legs"`
	Breakeven     *Breakeven     `json:"breakeven,omitempty"`
	Trailing      *Trailing      `json:"trailing,omitempty"`
	CreatedAt     time.Time      `json:"createdAt"`
	UpdatedAt     time.Time      `json:"updatedAt"`
	// Anchor is the number of the newest mark (events/mark) its recorded
	// levels have taken in, as MarkNode numbered them: the marks after it
	// move its stop where the rules put it (Derive) without a commit of
	// the account. Brackets recorded before marks have none: no mark moves
	// them until the account records them again.
	Anchor   uint64 `json:"anchor,omitempty"`
	MarkNode string `json:"markNode,omitempty"`
	Marked   bool   `json:"marked,omitempty"` // Anchor and MarkNode are set
}

// BracketSet records a bracket opened or changed: the whole bracket after it.
type BracketSet struct {
	Bracket Bracket `json:"bracket"`
}

// BracketEnd records a bracket's end; its orders were canceled or filled in the same commit.
type BracketEnd struct {
	BracketID string    `json:"bracketId"`
	Reason    string    `json:"reason"` // withdrawn, stop_filled, targets_filled, position_closed, entry_canceled, flatten
	At        time.Time `json:"at"`
}

func (BracketSet) Type() string { return "bracket.set.v1" }
func (BracketEnd) Type() string { return "bracket.ended.v1" }

func bracketRegistry() events.Registry {
	return events.Registry{
		BracketSet{}.Type(): events.Of[BracketSet](),
		BracketEnd{}.Type(): events.Of[BracketEnd](),
	}
}
