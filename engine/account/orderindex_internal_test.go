package account

import (
	"errors"
	"testing"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

func placed(coid, id string) []events.Event {
	return []events.Event{evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: id, ClientOrderID: coid}}}
}

// The index keeps a clientOrderId folded at a known sequence as its hash
// and that sequence only, and answers it by reading the commit back; a
// hash another clientOrderId holds costs a read, never a false answer, and
// the second clientOrderId is then kept whole; a read that fails is an
// error, not an answer.
func TestTheOrderIndexIsExact(t *testing.T) {
	log := map[uint64][]events.Event{}
	reads := 0
	var down error
	s := New("acct_1")
	s.UseFinder(func(seq uint64) ([]events.Event, error) {
		reads++
		if down != nil {
			return nil, down
		}
		return log[seq], nil
	})
	fold := func(seq uint64, coid, id string) {
		log[seq] = placed(coid, id)
		s = Fold(s, seq, log[seq])
	}
	fold(7, "a", "ord_a")
	fold(9, "b", "ord_b")
	if len(s.Orders.orders.exact) != 0 || len(s.Orders.orders.at) != 2 || len(s.History.OrderKeys) != 2 || len(s.History.Orders) != 0 {
		t.Fatalf("index: %d whole, %d keys", len(s.Orders.orders.exact), len(s.Orders.orders.at))
	}
	for _, c := range []struct {
		coid, id string
		used     bool
	}{{"a", "ord_a", true}, {"b", "ord_b", true}, {"c", "", false}} {
		id, used, err := s.OrderFor(c.coid)
		if err != nil || used != c.used || id != c.id {
			t.Errorf("OrderFor(%q) = %q, %v, %v; want %q, %v", c.coid, id, used, err, c.id, c.used)
		}
	}
	if reads != 2 {
		t.Fatalf("%d reads of the log for two hits and a miss, want 2", reads)
	}

	// "x" whose hash "a"'s commit holds: read, not the same, so new; kept whole.
	s.Orders.orders.at[keyHash("x")] = 7
	if _, used, err := s.OrderFor("x"); used || err != nil {
		t.Fatalf("a clientOrderId that shares a hash with another was taken as used (%v)", err)
	}
	fold(11, "x", "ord_x")
	if s.Orders.orders.exact["x"] != "ord_x" || s.OrderID("x") != "ord_x" || s.OrderID("a") != "ord_a" {
		t.Fatalf("after the shared hash: x %q, a %q", s.OrderID("x"), s.OrderID("a"))
	}

	// The log cannot be read: the decision records nothing and says why.
	down = errors.New("no responders")
	if err := idempotent(s, "b"); err == nil || errors.As(err, new(*commands.Refusal)) {
		t.Fatalf("a clientOrderId the log could not confirm answered %v, want the log's error", err)
	}
	down = nil
	var ref *commands.Refusal
	if err := idempotent(s, "b"); !errors.As(err, &ref) || ref.Code != commands.CodeIdempotencyConflict || ref.Params["brokerOrderId"] != "ord_b" {
		t.Fatalf("a repeated clientOrderId answered %v, want 409 naming ord_b", err)
	}

	// A state with no finder says so rather than answering.
	s.UseFinder(nil)
	if _, _, err := s.OrderFor("a"); !errors.Is(err, ErrNoFinder) {
		t.Fatalf("no finder: %v", err)
	}
}
