package bars

import (
	"context"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/engine/market"
)

// Service aggregates a feed's ticks into the store and the live fan-out.
type Service struct {
	Store *Store
	Live  *Live
	// FlushEvery is how often open minute and day bars are saved (closed bars
	// are saved when they close).
	FlushEvery time.Duration
}

// NewService makes a service over an empty store; saver may be nil.
func NewService(retention Retention, saver Saver) *Service {
	st := NewStore(retention, saver)
	return &Service{Store: st, Live: NewLive(st), FlushEvery: 5 * time.Second}
}

// Tick folds one quote: a trade (Size > 0) prices the bar at Last and adds
// Size to its volume; a quote-only update (Size 0) prices it at the mid.
func (s *Service) Tick(q market.Quote) {
	var price, size *apd.Decimal
	if q.Size.Sign() > 0 {
		price, size = q.Last.Apd(), q.Size.Apd()
	} else {
		price, size = q.Mid().Apd(), apd.New(0, 0)
	}
	s.Store.Add(q.Instrument, q.At, price, size)
	s.Live.Touch(q.Instrument)
}

// Attach feeds every quote of feed into the service, until the returned cancel.
func (s *Service) Attach(feed market.Feed) (cancel func()) { return feed.Subscribe(s.Tick) }

// Run fans live bars out and saves open bars periodically until ctx ends,
// then saves the open bars once more.
func (s *Service) Run(ctx context.Context) {
	go s.Live.Run(ctx)
	t := time.NewTicker(s.FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.Store.FlushOpen()
			return
		case <-t.C:
			s.Store.FlushOpen()
		}
	}
}
