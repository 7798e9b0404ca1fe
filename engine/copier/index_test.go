package copier_test

import (
	"slices"
	"testing"

	"github.com/svc/engine/engine/copier"
	"github.com/svc/engine/events"
	evcopier "github.com/svc/engine/events/copier"
)

// Each record of a leader order's actions is indexed once, in order, past
// a key another order's run holds; the records it holds are told apart
// when they are read back (OrderRecords), by the order's id.
func TestOrdersIndexEveryRecordOfALeaderOrder(t *testing.T) {
	s := copier.New("g1")
	s = copier.Fold(s, 1, []events.Event{evcopier.GroupCreated{GroupID: "g1", Leader: "L"}})
	s.Orders[copier.OrderKey("A")+1] = 99 // another order's run meets A's
	rec := func(seq, leaderSeq uint64, acts ...evcopier.Action) {
		s = copier.Fold(s, seq, []events.Event{evcopier.MirrorsRecorded{LeaderSeq: leaderSeq, Actions: acts}})
	}
	rec(5, 10, evcopier.Action{Op: evcopier.OpPlace, LeaderOrderID: "A"}, evcopier.Action{Op: evcopier.OpPlace, LeaderOrderID: "B"})
	rec(6, 11, evcopier.Action{Op: evcopier.OpReplace, LeaderOrderID: "A"}, evcopier.Action{Op: evcopier.OpCancel, LeaderOrderID: "A"})
	rec(7, 12, evcopier.Action{Op: evcopier.OpPlace, LeaderOrderID: "C"})
	if got := s.RecordsOf("A"); !slices.Equal(got, []uint64{5, 6, 99}) {
		t.Fatalf("A's records %v, want 5, 6 and the other order's 99", got)
	}
	if got := s.RecordsOf("B"); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("B's records %v", got)
	}
	if got := s.RecordsOf("D"); len(got) != 0 {
		t.Fatalf("an order never recorded has records %v", got)
	}
	if s.Through != 12 {
		t.Fatalf("through %d", s.Through)
	}
	other := []events.Event{evcopier.MirrorsRecorded{LeaderSeq: 9, Actions: []evcopier.Action{{Op: evcopier.OpPlace, LeaderOrderID: "Z"}}}}
	if rs := copier.OrderRecords(other, "A"); len(rs) != 0 {
		t.Fatalf("another order's record read back as A's: %+v", rs)
	}
	both := []events.Event{evcopier.MirrorsRecorded{LeaderSeq: 11, Actions: []evcopier.Action{
		{Op: evcopier.OpReplace, LeaderOrderID: "A"}, {Op: evcopier.OpPlace, LeaderOrderID: "B"}, {Op: evcopier.OpCancel, LeaderOrderID: "A"}}}}
	rs := copier.OrderRecords(both, "A")
	if len(rs) != 2 || rs[0].Op != evcopier.OpReplace || rs[1].Op != evcopier.OpCancel || rs[0].LeaderSeq != 11 {
		t.Fatalf("A's actions in one record %+v", rs)
	}
}
