package paper

import (
	"sort"

	"github.com/svc/engine/events"
)

// maxBest bounds the quotes a book keeps to answer the best touch since a
// quote; a wake queued before the oldest kept gets the best since that one
// (never better than the truth: its stop moves less, never too far).
const maxBest = 4096

// best answers the best touch of one side since a quote: the quotes that
// no later quote betters, oldest first (their touches worsen with time).
// The highest bids and lowest asks also hold, entry by entry, the groups of
// queued stops whose best since their wake is that entry's (trail.go).
type best struct {
	seqs   []uint64
	prices []events.Decimal
	higher bool // bids: higher is better; asks: lower
	trails bool
	groups []*trailGroup // with trails: by entry, nil where no stop waits
}

func (b *best) better(p, than events.Decimal) bool {
	if b.higher {
		return p.Cmp(than) >= 0
	}
	return p.Cmp(than) <= 0
}

// add records the touch of quote seq. The entries it betters go, and their
// groups of stops merge into the new entry's: their best is now this touch.
// Past maxBest the oldest go, their stops counted from the oldest kept (a
// best never better than the truth).
func (b *best) add(seq uint64, p events.Decimal) (raised bool) {
	n := len(b.prices)
	for n > 0 && b.better(p, b.prices[n-1]) {
		n--
	}
	if b.trails {
		var g *trailGroup
		for _, old := range b.groups[n:] {
			g = merge(g, old)
		}
		if g != nil {
			raised = g.size > 0 && g.best.Cmp(p) != 0
			g.best = p
			g.activate()
		}
		b.groups = append(b.groups[:n], g)
	}
	b.seqs, b.prices = append(b.seqs[:n], seq), append(b.prices[:n], p)
	if len(b.seqs) > maxBest {
		drop := len(b.seqs) - maxBest
		if b.trails {
			var g *trailGroup
			for _, old := range b.groups[:drop+1] {
				g = merge(g, old)
			}
			if g != nil {
				g.best = b.prices[drop]
			}
			b.groups = b.groups[drop:]
			b.groups[0] = g
		}
		b.seqs, b.prices = b.seqs[drop:], b.prices[drop:]
	}
	return raised
}

// group is the group of stops whose best since quote seq is this side's
// best since it (made when none waits there yet); nil before any quote.
func (b *best) group(seq uint64) *trailGroup {
	if len(b.seqs) == 0 {
		return nil
	}
	i := b.index(seq)
	if b.groups[i] == nil {
		b.groups[i] = newTrailGroup(b.prices[i], b.higher)
	}
	return b.groups[i]
}

// through lists the accounts whose queued stop the touch reaches at the
// level their rules put it at by the best since their wake.
func (b *best) through(touch events.Decimal) []string {
	var due []string
	for _, g := range b.groups {
		if g != nil {
			due = g.through(touch, due)
		}
	}
	return due
}

// index is the entry that holds the best since quote seq.
func (b *best) index(seq uint64) int {
	i := sort.Search(len(b.seqs), func(i int) bool { return b.seqs[i] >= seq })
	if i == len(b.seqs) {
		i--
	}
	return i
}

// since is the best touch of the quotes from seq on (the newest when seq is
// past them all).
func (b *best) since(seq uint64) events.Decimal {
	return b.prices[b.index(seq)]
}
