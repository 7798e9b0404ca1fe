package frames

import (
	"context"
	"slices"
	"time"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/projections"
)

// BracketLeg is one exit of a bracket as read. ParentOrderID names the entry
// while the leg is pre_armed and is null once it protects a position.
type BracketLeg struct {
	ID            string          `json:"id"`
	Kind          string          `json:"kind"`
	State         string          `json:"state"`
	Price         *events.Decimal `json:"price"`
	Quantity      events.Decimal  `json:"quantity"`
	Share         *events.Decimal `json:"share"`
	Filled        events.Decimal  `json:"filledQuantity"`
	ParentOrderID *string         `json:"parentOrderId"`
	// RetryAt: a provider account's working leg whose order could not
	// reach the provider rests nowhere now; it is placed again then.
	RetryAt *time.Time `json:"retryAt,omitempty"`
}

// Bracket is an active bracket as read: the frame's brackets and the items of GET /api/account/brackets.
type Bracket struct {
	ID              string         `json:"id"`
	State           string         `json:"state"`
	Instrument      string         `json:"instrument"`
	Side            string         `json:"side"`
	EntryOrderID    *string        `json:"entryOrderId"`
	EntryPrice      events.Decimal `json:"entryPrice"`
	PlannedQuantity events.Decimal `json:"plannedQuantity"`
	ArmedQuantity   events.Decimal `json:"armedQuantity"`
	PlanID          *string        `json:"planId"`
	PlanRevision    *string        `json:"planRevision"`
	ClientOrderID   *string        `json:"clientOrderId"`
	Legs            []BracketLeg   `json:"legs"`
	CreatedAt       time.Time      `json:"createdAt"`
	UpdatedAt       time.Time      `json:"updatedAt"`
}

// ManagedExit is a rule the engine manages for a bracket from quotes: a
// breakeven move (state waiting, then done) or a trailing stop (waiting for
// its activation, then trailing).
type ManagedExit struct {
	ID           string          `json:"id"`
	BracketID    string          `json:"bracketId"`
	Kind         string          `json:"kind"` // breakeven or trailing
	State        string          `json:"state"`
	Instrument   string          `json:"instrument"`
	Side         string          `json:"side"`
	StopOrderID  *string         `json:"stopOrderId"`
	StopPrice    *events.Decimal `json:"stopPrice"`    // where the stop rests now
	TriggerPrice *events.Decimal `json:"triggerPrice"` // breakeven: its trigger; trailing: its activation (null: from the start)
	MoveTo       *events.Decimal `json:"moveTo"`       // breakeven: the level it moves the stop to
	Distance     *events.Decimal `json:"distance"`     // trailing: how far behind the best price
	BestPrice    *events.Decimal `json:"bestPrice"`    // trailing: the best price it has trailed
}

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// BracketView is the read shape of a recorded bracket.
func BracketView(b evacct.Bracket) Bracket {
	v := Bracket{ID: b.ID, State: b.State, Instrument: b.Instrument, Side: b.Side, EntryOrderID: opt(b.EntryOrderID),
		EntryPrice: b.EntryPrice, PlannedQuantity: b.Planned, ArmedQuantity: b.Armed, PlanID: opt(b.PlanID),
		PlanRevision: opt(b.PlanRevision), ClientOrderID: opt(b.ClientOrderID), Legs: make([]BracketLeg, 0, len(b.Legs)),
		CreatedAt: b.CreatedAt.UTC(), UpdatedAt: b.UpdatedAt.UTC()}
	for _, l := range b.Legs {
		v.Legs = append(v.Legs, BracketLeg{ID: l.ID, Kind: l.Kind, State: l.State, Price: l.Price, Quantity: l.Quantity,
			Share: l.Share, Filled: l.Filled, ParentOrderID: opt(l.ParentOrderID), RetryAt: utc(l.RetryAt)})
	}
	return v
}

// ManagedExitsOf are the rules the engine manages for bracket b.
func ManagedExitsOf(b evacct.Bracket) []ManagedExit {
	var out []ManagedExit
	var stopID *string
	var stopPx *events.Decimal
	for _, l := range b.Legs {
		if l.Kind == evacct.LegStop && (l.State == evacct.LegWorking || l.State == evacct.LegPreArmed) {
			stopID, stopPx = opt(l.ID), l.Price
			if l.State == evacct.LegPreArmed {
				stopID = nil
			}
		}
	}
	if r := b.Breakeven; r != nil {
		trig, to := r.Trigger, r.StopPrice
		st := "waiting"
		if r.Done {
			st = "done"
		}
		out = append(out, ManagedExit{ID: b.ID + ":breakeven", BracketID: b.ID, Kind: "breakeven", State: st, Instrument: b.Instrument,
			Side: b.Side, StopOrderID: stopID, StopPrice: stopPx, TriggerPrice: &trig, MoveTo: &to})
	}
	if r := b.Trailing; r != nil {
		dist := r.Distance
		st := "waiting"
		if r.Active {
			st = "trailing"
		}
		out = append(out, ManagedExit{ID: b.ID + ":trailing", BracketID: b.ID, Kind: "trailing", State: st, Instrument: b.Instrument,
			Side: b.Side, StopOrderID: stopID, StopPrice: stopPx, TriggerPrice: r.Activation, Distance: &dist, BestPrice: r.Best})
	}
	return out
}

// Brackets reads an account's active brackets, each with its stop where
// the marks after its anchor put it (projections.Stops), and the exits the
// engine manages for them; and the revision the read names for an account
// at rev (projections.Stops.Revision: no older than the marks it shows).
func Brackets(ctx context.Context, s projections.Store, accountID string, rev uint64) ([]Bracket, []ManagedExit, uint64, error) {
	st := projections.NewStops(s)
	bs, ms, _, err := brackets(ctx, s, st, accountID)
	return bs, ms, st.Revision(rev), err
}

// brackets is Brackets deriving through st, with the mark stacks
// (projections.MarkKey) whose marks move the brackets' working stops.
func brackets(ctx context.Context, s projections.Store, st *projections.Stops, accountID string) ([]Bracket, []ManagedExit, []string, error) {
	bs, err := projections.ListInto[evacct.Bracket](ctx, s, projections.CollBracket, projections.Query{Prefix: accountID + "/"})
	if err != nil {
		return nil, nil, nil, err
	}
	brackets, managed := make([]Bracket, 0, len(bs)), []ManagedExit{}
	var follows []string
	for _, b := range bs {
		if projections.Follows(&b) && b.StopLeg() != nil {
			if k := projections.MarkKey(b.Instrument, b.MarkNode); !slices.Contains(follows, k) {
				follows = append(follows, k)
			}
		}
		d, err := st.Bracket(ctx, accountID, b)
		if err != nil {
			return nil, nil, nil, err
		}
		brackets = append(brackets, BracketView(d))
		managed = append(managed, ManagedExitsOf(d)...)
	}
	return brackets, managed, follows, nil
}

// utc is t in UTC, nil for nil.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
