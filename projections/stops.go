package projections

import (
	"context"

	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/events/mark"
)

// Follows reports whether marks move b's stop: b's levels took in marks
// (Marked) and a breakeven or trailing rule moves its stop.
func Follows(b *evacct.Bracket) bool {
	return b.Marked && (b.Breakeven != nil || b.Trailing != nil)
}

// Stops derives the stop levels a read shows. A mark that moves a bracket's
// stop rewrites neither the bracket's document nor its stop order's: a
// bracket, and the working order of its stop leg, are shown where the marks
// after the bracket's anchor put the stop (evacct.Derive). Stops reads each
// stack and each bracket once; it serves one read (a request, a frame) on
// one goroutine, and holds what it read for no longer.
type Stops struct {
	s        Store
	stacks   map[string]*mark.Stack     // by MarkKey; nil: none recorded
	brackets map[string]*evacct.Bracket // by accountID/bracketID, derived; nil: not active
	seq      uint64                     // the newest commit of the stacks read
}

// Seq is the log sequence of the newest stack's commit among those read:
// a read showing their levels names a revision at least this (Revision).
func (st *Stops) Seq() uint64 { return st.seq }

// Revision is the revision a read of the account at rev names once it
// shows the stop levels st derived: the later of rev and Seq.
func (st *Stops) Revision(rev uint64) uint64 { return max(rev, st.seq) }

// NewStops makes the stop levels of one read of s.
func NewStops(s Store) *Stops { return &Stops{s: s} }

// Stack is the newest recorded stack of instrument's marks as node numbered
// them; nil when there is none.
func (st *Stops) Stack(ctx context.Context, instrument, node string) (*mark.Stack, error) {
	k := MarkKey(instrument, node)
	if s, ok := st.stacks[k]; ok {
		return s, nil
	}
	var doc MarkDoc
	ok, err := st.s.Get(ctx, CollMark, k, &doc)
	if err != nil {
		return nil, err
	}
	var s *mark.Stack
	if ok {
		s = &doc.Stack
		st.seq = max(st.seq, doc.Seq)
	}
	if st.stacks == nil {
		st.stacks = map[string]*mark.Stack{}
	}
	st.stacks[k] = s
	return s, nil
}

// Bracket is accountID's bracket b (its recorded document) as the marks
// after its anchor have moved it: b itself when no mark moves it.
func (st *Stops) Bracket(ctx context.Context, accountID string, b evacct.Bracket) (evacct.Bracket, error) {
	if Follows(&b) {
		s, err := st.Stack(ctx, b.Instrument, b.MarkNode)
		if err != nil {
			return b, err
		}
		b = evacct.Derive(b, s)
	}
	if st.brackets == nil {
		st.brackets = map[string]*evacct.Bracket{}
	}
	st.brackets[accountID+"/"+b.ID] = &b
	return b, nil
}

// Order is accountID's order o with its stop price at its bracket's derived
// stop level when o is the working stop leg of a bracket marks move; o
// itself otherwise. Only a working reduce-only order with a stop price and
// a bracket costs a read: of its bracket, unless Bracket read it already,
// and of the bracket's stack when marks move it.
func (st *Stops) Order(ctx context.Context, accountID string, o Order) (Order, error) {
	if o.BracketID == "" || !o.ReduceOnly || o.StopPrice == nil || !o.Working() {
		return o, nil
	}
	k := accountID + "/" + o.BracketID
	b, ok := st.brackets[k]
	if !ok {
		var rec evacct.Bracket
		found, err := st.s.Get(ctx, CollBracket, k, &rec)
		if err != nil {
			return o, err
		}
		if !found {
			if st.brackets == nil {
				st.brackets = map[string]*evacct.Bracket{}
			}
			st.brackets[k] = nil
			return o, nil
		}
		d, err := st.Bracket(ctx, accountID, rec)
		if err != nil {
			return o, err
		}
		b = &d
	}
	if b == nil || !Follows(b) {
		return o, nil
	}
	if l := b.StopLeg(); l != nil && l.ID == o.BrokerOrderID && l.Price != nil {
		level := *l.Price
		o.StopPrice = &level
	}
	return o, nil
}

// Orders applies Order to each of accountID's orders os, in place.
func (st *Stops) Orders(ctx context.Context, accountID string, os []Order) error {
	for i := range os {
		o, err := st.Order(ctx, accountID, os[i])
		if err != nil {
			return err
		}
		os[i] = o
	}
	return nil
}
