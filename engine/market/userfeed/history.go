package userfeed

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/market/bars"
	"github.com/svc/engine/engine/market/spread"
	"github.com/svc/engine/engine/provider"
)

// MaxChartBars is the most bars one chart read asks the provider for.
const MaxChartBars = 10000

// ErrTimeframe: the provider's charts do not serve the timeframe (seconds:
// its charts start at one minute).
var ErrTimeframe = errors.New("userfeed: futures charts start at one minute")

// chartSizes are the bar widths in minutes a chart read may ask for, each
// aligned to the hour (the provider's session opens on the hour).
var chartSizes = []int{1, 5, 15, 30, 60}

// chartFor is the provider chart read behind countBack bars of tf: bars
// of tf's base resolution, minute bars of the smallest width dividing tf
// that fits in MaxChartBars (the store aggregates them into tf's
// buckets), or daily bars.
func chartFor(tf market.Timeframe, countBack int) (provider.BarRequest, market.Resolution, error) {
	switch tf.Base() {
	case market.Second:
		return provider.BarRequest{}, 0, ErrTimeframe
	case market.Day:
		days := int(tf.Seconds() / 86400)
		return provider.BarRequest{Daily: true, Count: min(countBack*max(days, 1), MaxChartBars)}, market.Day, nil
	}
	minutes := int(tf.Seconds() / 60)
	size := 1
	for _, s := range chartSizes {
		if minutes%s != 0 {
			continue
		}
		size = s
		if countBack*(minutes/s) <= MaxChartBars {
			break
		}
	}
	return provider.BarRequest{Minutes: size, Count: min(countBack*(minutes/size), MaxChartBars)}, market.Minute, nil
}

// chart reads a contract's bars from the login's charts (ChartSession).
func (f *Feed) chart(ctx context.Context, c Contract, r provider.BarRequest) ([]market.Bar, error) {
	sess, err := f.session(ctx)
	if err != nil {
		return nil, err
	}
	cs, ok := sess.(provider.ChartSession)
	if !ok {
		return nil, &market.FeedRefused{Reason: market.ReasonNoSubscription}
	}
	r.Symbol = c.Symbol
	got, err := cs.Bars(ctx, r)
	if err != nil {
		var ne *provider.NotEntitled
		if errors.As(err, &ne) {
			f.refuse(c.Root, ne.Reason)
		} else if errors.Is(err, provider.ErrUnauthorized) {
			f.kill()
		}
		return nil, refusalOf(err)
	}
	out := make([]market.Bar, len(got))
	for i, b := range got {
		out[i] = market.Bar{Time: b.Start.Unix()}
		out[i].Open.Set(b.Open.Apd())
		out[i].High.Set(b.High.Apd())
		out[i].Low.Set(b.Low.Apd())
		out[i].Close.Set(b.Close.Apd())
		out[i].Volume.Set(b.Volume.Apd())
	}
	return out, nil
}

// scratchRetention keeps everything a history read puts in its own store.
var scratchRetention = bars.Retention{1 << 62, 1 << 62, 1 << 62}

// load puts leg's bars for countBack bars of tf ending before to into st,
// under the leg's name, read from the login's charts.
func (f *Feed) load(ctx context.Context, st *bars.Store, leg string, tf market.Timeframe, countBack int, to int64) error {
	c, _, err := f.resolve(ctx, leg)
	if err != nil {
		return err
	}
	r, res, err := chartFor(tf, countBack)
	if err != nil {
		return err
	}
	if to > 0 {
		r.To = time.Unix(to-1, 0).UTC()
	}
	list, err := f.chart(ctx, c, r)
	if err != nil {
		return err
	}
	for _, b := range list {
		st.Put(leg, res, b)
	}
	return nil
}

// History is up to countBack bars of a futures symbol at tf opening before
// to (Unix seconds; 0: now), oldest first, from the login's own charts,
// aggregated into tf's buckets as every history is.
func (f *Feed) History(ctx context.Context, symbol string, tf market.Timeframe, countBack int, to int64) ([]market.Bar, error) {
	st := bars.NewStore(scratchRetention, nil)
	if err := f.load(ctx, st, symbol, tf, countBack, to); err != nil {
		return nil, err
	}
	return st.History(symbol, tf, countBack, to), nil
}

// Legs says which legs of an expression are futures, and where the
// other legs' prices come from (the engine's crypto feed and its bars).
type Legs struct {
	IsFutures func(leg string) bool
	Feed      market.Feed // the other legs' ticks
	Bars      *bars.Store // the other legs' bars
}

func (l Legs) futures(leg string) bool { return l.IsFutures == nil || l.IsFutures(leg) }

// SpreadHistory is up to countBack bars of the expression at tf opening
// before to: the futures legs from the login's own charts, every other leg
// from legs.Bars, evaluated over the buckets where every leg has a bar.
// Every futures leg must be entitled.
func (f *Feed) SpreadHistory(ctx context.Context, e *spread.Expr, tf market.Timeframe, countBack int, to int64, legs Legs) ([]market.Bar, error) {
	st := bars.NewStore(scratchRetention, nil)
	want := min(countBack*4, MaxChartBars) // the legs' buckets need not meet everywhere
	res := tf.Base()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, leg := range e.Legs {
		if !legs.futures(leg) {
			if legs.Bars != nil {
				for _, b := range legs.Bars.History(leg, tf, want, to) {
					st.Put(leg, res, b)
				}
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.load(ctx, st, leg, tf, want, to); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return st.SpreadHistory(e, tf, countBack, to), nil
}

// SubscribeBars offers the live bars of the expression at tf (an
// instrument or a spread, its futures legs from the login's own quotes,
// every other leg's ticks from legs.Feed) to sink as subscription subNo,
// now and on every change, until cancel. The bars are the user's own,
// aggregated apart from every other user's. Each futures leg's stream is
// opened (and must be entitled) and its open bars seeded from the login's
// charts first (another leg's from legs.Bars), so the newest bar is whole
// from the start.
func (f *Feed) SubscribeBars(ctx context.Context, e *spread.Expr, tf market.Timeframe, sink bars.Sink, subNo int, legs Legs) (cancel func(), err error) {
	var undo []func()
	fail := func(err error) (func(), error) {
		for _, u := range undo {
			u()
		}
		return nil, err
	}
	for _, leg := range e.Legs {
		if !legs.futures(leg) {
			if legs.Feed != nil {
				undo = append(undo, legs.Feed.Subscribe(func(q market.Quote) {
					if q.Instrument == leg {
						f.live.Tick(q)
					}
				}))
			}
			if legs.Bars != nil {
				fillOpen(f.live.Store, leg, tf, func(base market.Timeframe, n int) []market.Bar { return legs.Bars.History(leg, base, n, 0) })
			}
			continue
		}
		c, _, err := f.resolve(ctx, leg)
		if err != nil {
			return fail(err)
		}
		st, err := f.acquire(c)
		if err != nil {
			return fail(err)
		}
		undo = append(undo, st.release)
		if _, err := f.wait(ctx, st); err != nil {
			return fail(err)
		}
		f.seed(ctx, c, leg, tf)
		st.alias(leg)
		undo = append(undo, func() { st.unalias(leg) })
	}
	stop := f.live.Live.SubscribeSink(e, tf, sink, subNo)
	var once sync.Once
	return func() {
		once.Do(func() {
			stop()
			for _, u := range undo {
				u()
			}
		})
	}, nil
}

// seed fills the live bars of leg with the login's recent bars of the
// contract (never over a bar the live quotes made): the open bucket of tf.
func (f *Feed) seed(ctx context.Context, c Contract, leg string, tf market.Timeframe) {
	fillOpen(f.live.Store, leg, tf, func(base market.Timeframe, n int) []market.Bar {
		r := provider.BarRequest{Minutes: 1, Count: n}
		if base.Unit.Code == "d" {
			r = provider.BarRequest{Daily: true, Count: n}
		}
		list, err := f.chart(ctx, c, r)
		if err != nil {
			return nil
		}
		return list
	})
}

var (
	oneMinute = market.Timeframe{N: 1, Unit: market.Units[1]}
	oneDay    = market.Timeframe{N: 1, Unit: market.Units[3]}
)

// fillOpen fills st's bars of leg at tf's base resolution with the bars
// read gives of the open bucket of tf (a second's bar is made from the
// quotes alone).
func fillOpen(st *bars.Store, leg string, tf market.Timeframe, read func(base market.Timeframe, n int) []market.Bar) {
	base, res := oneMinute, market.Minute
	switch tf.Base() {
	case market.Second:
		return
	case market.Day:
		base, res = oneDay, market.Day
	}
	n := int(min(max(tf.Seconds()/base.Seconds(), 1), MaxChartBars))
	for _, b := range read(base, n) {
		st.Fill(leg, res, b)
	}
}
