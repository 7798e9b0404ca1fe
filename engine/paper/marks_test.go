package paper_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/engine/paper"
	"github.com/svc/engine/events"
	"github.com/svc/engine/events/mark"
)

// marked is a reactor with marks: wakes are named on started (and end the
// account's triggers, as a stop's fill would), marks recorded are kept.
type marked struct {
	r       *paper.Reactor
	started chan string
	touches chan paper.Touch
	mu      sync.Mutex
	stacks  []*mark.Stack
}

func newMarked(t *testing.T, seed *mark.Stack) *marked {
	m := &marked{started: make(chan string, 200), touches: make(chan paper.Touch, 200)}
	m.r = paper.New(func(acct, _ string, tc paper.Touch) {
		m.touches <- tc
		m.started <- acct
		m.r.Track(acct, nil)
	})
	m.r.RecordMarks("", func(s *mark.Stack) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.stacks = append(m.stacks, s)
	})
	if seed != nil {
		m.r.SeedMarks(seed)
	}
	t.Cleanup(m.r.Close)
	return m
}

func (m *marked) recorded() []*mark.Stack {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*mark.Stack(nil), m.stacks...)
}

// anchored is trailing's triggers with the move's rule and its anchor.
func anchored(stop, stored, dist, wake string, anchor uint64) []paper.Trigger {
	ts := trailing(stop, stored, dist, "", wake)
	ts[0].LevelAt, ts[0].Anchor, ts[0].Marked = ts[0].Trail.LevelAt, anchor, true
	return ts
}

// With marks, a quote that moves stops is one mark, not a wake of each
// account: fifty trailing stops follow a rising bid with no wake sent, a
// mark for each quote that moved them and none for one that did not; a dip
// through one stop's level where the rule has put it wakes that account,
// which decides on the newest stack.
func TestAQuoteThatMovesStopsIsOneMarkNotAWakeEach(t *testing.T) {
	m := newMarked(t, nil)
	for i := range 50 {
		m.r.Track(fmt.Sprintf("a%02d", i), map[string][]paper.Trigger{"X": anchored(fmt.Sprintf("s%02d", i), "90", fmt.Sprint(10+i), "100.5", 0)})
	}
	m.r.OnQuote("X", d("101"), d("101.5")) // crosses every wake level
	m.r.OnQuote("X", d("130"), d("130.5")) // a new high
	m.r.OnQuote("X", d("125"), d("125.5")) // lower: moves nothing
	wokeNext(t, m.started, "", "no wake for a move")
	got := m.recorded()
	if len(got) != 2 || got[1].N != 2 || got[1].Instrument != "X" {
		t.Fatalf("%d marks recorded (%+v), want 2", len(got), got)
	}
	if best, ok := got[1].BestSince(true, 0); !ok || best.Cmp(d("130")) != 0 {
		t.Fatalf("best bid of the marks %s, want 130", best)
	}
	if left := m.r.Drain(100 * time.Millisecond); left != 0 {
		t.Fatalf("Drain waited on %d parked accounts", left)
	}
	m.r.OnQuote("X", d("119.5"), d("120")) // a00's rule: 130 - 10 = 120; a01's 119
	wokeNext(t, m.started, "a00", "the stop the dip went through")
	wokeNext(t, m.started, "", "only that one")
	tc := <-m.touches
	if tc.Marks == nil || tc.Marks.N != 2 {
		t.Fatalf("the wake decided on marks %+v, want the newest (2)", tc.Marks)
	}
}

// After a start, the marks recorded before it park an account whose
// bracket is anchored before them where they put its stop; one anchored
// after them keeps its recorded level.
func TestSeededMarksParkTheAccountsBehindThem(t *testing.T) {
	seed := (&mark.Stack{Instrument: "X"}).Push(1, p("105"), p("105.5")).Push(2, p("110"), p("110.5")).Push(3, p("104"), p("104.5"))
	m := newMarked(t, seed)
	m.r.Track("behind", map[string][]paper.Trigger{"X": anchored("s1", "90", "10", "100.5", 1)})  // best since mark 1: 110, level 100
	m.r.Track("current", map[string][]paper.Trigger{"X": anchored("s2", "90", "10", "100.5", 3)}) // nothing since: 90
	m.r.OnQuote("X", d("100"), d("100.5"))
	wokeNext(t, m.started, "behind", "the stop the seeded marks moved to 100")
	wokeNext(t, m.started, "", "not the stop anchored after them")
}

func p(s string) *events.Decimal {
	v := d(s)
	return &v
}
