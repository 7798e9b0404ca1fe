package mark_test

import (
	"testing"

	"github.com/svc/engine/events"
	"github.com/svc/engine/events/mark"
)

func d(s string) *events.Decimal {
	v := events.MustDecimal(s)
	return &v
}

// The best touch since an anchor is the best of the marks numbered after
// it, whatever the order they came in; a stack is never changed by a push.
func TestBestSinceIsTheBestMarkAfterTheAnchor(t *testing.T) {
	bids := []string{"100", "104", "102", "103", "101", "99", "101"}
	asks := []string{"101", "105", "103", "104", "102", "100", "102"}
	s := &mark.Stack{Instrument: "X"}
	var stacks []*mark.Stack
	for i := range bids {
		s = s.Push(uint64(i+1), d(bids[i]), d(asks[i]))
		stacks = append(stacks, s)
	}
	for anchor := 0; anchor <= len(bids); anchor++ {
		var high, low *events.Decimal
		for i := anchor; i < len(bids); i++ {
			if high == nil || d(bids[i]).Cmp(*high) > 0 {
				high = d(bids[i])
			}
			if low == nil || d(asks[i]).Cmp(*low) < 0 {
				low = d(asks[i])
			}
		}
		gotHigh, okHigh := s.BestSince(true, uint64(anchor))
		gotLow, okLow := s.BestSince(false, uint64(anchor))
		if high == nil {
			if okHigh || okLow {
				t.Fatalf("anchor %d: a best after the newest mark", anchor)
			}
			continue
		}
		if !okHigh || gotHigh.Cmp(*high) != 0 || !okLow || gotLow.Cmp(*low) != 0 {
			t.Fatalf("anchor %d: best bid %s (%v), ask %s (%v); want %s, %s", anchor, gotHigh, okHigh, gotLow, okLow, high, low)
		}
	}
	if got, _ := stacks[1].BestSince(true, 0); got.Cmp(*d("104")) != 0 || len(stacks[1].Bids) != 1 {
		t.Fatalf("an earlier stack changed by later pushes: %+v", stacks[1].Bids)
	}
	if s.N != uint64(len(bids)) || s.Instrument != "X" {
		t.Fatalf("stack numbered %d for %q", s.N, s.Instrument)
	}
}

// Past MaxEntries the oldest entries go: the best since an older anchor is
// then the best of those kept, never better than the truth.
func TestAStackKeepsItsNewestEntries(t *testing.T) {
	var s *mark.Stack
	n := mark.MaxEntries + 10
	for i := range n { // falling bids: every one stays until the bound
		s = s.Push(uint64(i+1), d(events.Int(int64(10000-i)).String()), nil)
	}
	if len(s.Bids) != mark.MaxEntries || len(s.Asks) != 0 {
		t.Fatalf("%d bids and %d asks kept", len(s.Bids), len(s.Asks))
	}
	got, ok := s.BestSince(true, 0)
	if want := events.Int(int64(10000 - 10)); !ok || got.Cmp(want) != 0 {
		t.Fatalf("best since 0 = %s, want the oldest kept %s", got, want)
	}
	if _, ok := (*mark.Stack)(nil).BestSince(true, 0); ok {
		t.Fatal("a nil stack has a best")
	}
}

// Subjects are one token whatever the symbol or node holds.
func TestSubjectIsOneToken(t *testing.T) {
	for _, c := range [][2]string{{"BRK.B", ""}, {"BTC-PERP", "node.1"}, {"a b*>", "n"}} {
		s := mark.Subject(c[0], c[1])
		if id, ok := events.SubjectID(s, events.KindMark); !ok || id == "" || containsAny(id, ". *>") {
			t.Fatalf("%q on %q: subject %q", c[0], c[1], s)
		}
	}
	if mark.Subject("X", "") == mark.Subject("X", "n") {
		t.Fatal("two nodes share a subject")
	}
}

func containsAny(s, chars string) bool {
	for _, c := range chars {
		for _, r := range s {
			if r == c {
				return true
			}
		}
	}
	return false
}
