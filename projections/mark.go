package projections

import (
	"fmt"

	"github.com/svc/engine/events"
	"github.com/svc/engine/events/mark"
)

// MarkKey is the key in CollMark of instrument's marks as node recorded
// them: the id of their log subject (mark.Subject), so a commit's subject
// names the stack it changes.
func MarkKey(instrument, node string) string {
	return events.ID(mark.Subject(instrument, node), events.KindMark)
}

// MarkDoc is a stack of marks as the read models keep it: the newest one
// recorded, and the log sequence of its commit. A read that shows stop
// levels the stack moved names a revision no older than Seq, so a frame a
// mark changed is ahead of the one before it (a client drops a frame at or
// behind the revision it holds).
type MarkDoc struct {
	Stack mark.Stack `json:"stack"`
	Seq   uint64     `json:"seq"`
}

// foldMark keeps the newest stack of the marks subject id: every Marked
// carries the whole stack, so a stack replaces the stored one only when its
// newest mark is later (a commit folded again never takes the stack back).
func foldMark(tx Tx, id string, c events.Committed) error {
	for _, e := range c.Events {
		m, ok := e.(mark.Marked)
		if !ok {
			continue
		}
		var old MarkDoc
		had, err := tx.Get(CollMark, id, &old)
		if err == nil && (!had || m.Stack.N > old.Stack.N) {
			err = tx.Put(CollMark, id, &MarkDoc{Stack: m.Stack, Seq: c.Seq})
		}
		if err != nil {
			return fmt.Errorf("fold %s at %d: %w", m.Type(), c.Seq, err)
		}
	}
	return nil
}
