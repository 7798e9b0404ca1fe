package market

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/svc/engine/events"
)

// Sim is the seeded simulated feed: a random walk in whole ticks per instrument,
// one quote per instrument every Interval. The same seed gives the same prices.
type Sim struct {
	*Hub
	instruments []Instrument
	rng         *rand.Rand
	prices      map[string]events.Decimal
	Interval    time.Duration
	now         func() time.Time
}

// NewSim makes a simulated feed over instruments, seeded, and publishes an opening quote for each.
func NewSim(instruments []Instrument, seed uint64, now func() time.Time) *Sim {
	s := &Sim{Hub: NewHub(), instruments: instruments, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		prices: map[string]events.Decimal{}, Interval: 250 * time.Millisecond, now: now}
	for _, in := range instruments {
		s.prices[in.Symbol] = in.StartPrice
		s.Publish(s.quote(in))
	}
	return s
}

// Name labels the feed.
func (s *Sim) Name() string { return "simulated" }

func (s *Sim) quote(in Instrument) Quote {
	p := s.prices[in.Symbol]
	half := in.TickSize
	return Quote{Instrument: in.Symbol, Bid: p.Sub(half), Ask: p.Add(half), Last: p, Size: events.Int(int64(1 + s.rng.IntN(5))), At: s.now()}
}

// Step moves every price by -2..+2 ticks and publishes the quotes.
func (s *Sim) Step() {
	for _, in := range s.instruments {
		ticks := int64(s.rng.IntN(5) - 2)
		p := s.prices[in.Symbol].Add(in.TickSize.Mul(events.Int(ticks)))
		if p.Cmp(in.TickSize.Mul(events.Int(10))) < 0 {
			p = in.TickSize.Mul(events.Int(10))
		}
		s.prices[in.Symbol] = p
		s.Publish(s.quote(in))
	}
}

// Run steps the feed every Interval until ctx ends.
func (s *Sim) Run(ctx context.Context) {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Step()
		}
	}
}
