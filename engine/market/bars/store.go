// Package bars aggregates ticks into OHLCV bars, keeps their history (in
// memory, persisted through a Saver), answers history for instruments and
// spread expressions at any timeframe, and fans live bars out to subscribers.
package bars

import (
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/market/spread"
)

// Retention is how long each stored resolution is kept.
type Retention [3]time.Duration

// DefaultRetention keeps 1-second bars 6 hours, 1-minute bars 30 days and
// daily bars 10 years.
var DefaultRetention = Retention{6 * time.Hour, 30 * 24 * time.Hour, 3650 * 24 * time.Hour}

// Saver persists bars. Save must not block.
type Saver interface {
	Save(symbol string, res market.Resolution, b market.Bar)
}

type series struct {
	bars      []market.Bar // ascending by Time
	openDirty bool         // the newest bar changed since it was last saved
}

// Store holds the bars of every symbol at the stored resolutions. Safe for
// concurrent use.
type Store struct {
	mu        sync.RWMutex
	series    map[string]*[3]series
	retention Retention
	saver     Saver
}

// NewStore makes an empty store; saver may be nil.
func NewStore(retention Retention, saver Saver) *Store {
	return &Store{series: map[string]*[3]series{}, retention: retention, saver: saver}
}

func floorTo(sec, width int64) int64 {
	q := sec / width
	if sec%width < 0 {
		q--
	}
	return q * width
}

// Add folds one tick (a trade at price of size, or a quote with size zero)
// into the symbol's bars at every stored resolution.
func (s *Store) Add(symbol string, at time.Time, price, size *apd.Decimal) {
	sec := at.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.series[symbol]
	if all == nil {
		all = &[3]series{}
		s.series[symbol] = all
	}
	for _, res := range market.Resolutions {
		ser := &all[res]
		bucket := floorTo(sec, res.Seconds())
		n := len(ser.bars)
		switch {
		case n == 0 || ser.bars[n-1].Time < bucket:
			if n > 0 && s.saver != nil && (res == market.Second || ser.openDirty) {
				s.saver.Save(symbol, res, ser.bars[n-1])
			}
			ser.bars = append(ser.bars, market.NewBar(bucket, price, size))
			ser.openDirty = res != market.Second
			s.trim(ser, res, sec)
		case ser.bars[n-1].Time == bucket:
			ser.bars[n-1].Trade(price, size)
			ser.openDirty = res != market.Second
		default: // a late tick: it widens its bar but does not close it
			i := sort.Search(n, func(i int) bool { return ser.bars[i].Time >= bucket })
			if i < n && ser.bars[i].Time == bucket {
				b := &ser.bars[i]
				closing := b.Close
				b.Trade(price, size)
				b.Close = closing
			} else {
				ser.bars = append(ser.bars, market.Bar{})
				copy(ser.bars[i+1:], ser.bars[i:])
				ser.bars[i] = market.NewBar(bucket, price, size)
			}
			if s.saver != nil {
				s.saver.Save(symbol, res, ser.bars[i])
			}
		}
	}
}

func (s *Store) trim(ser *series, res market.Resolution, now int64) {
	keep := now - int64(s.retention[res]/time.Second)
	slack := int64(s.retention[res]/time.Second) / 10 // trim in batches, not on every bar
	if len(ser.bars) == 0 || ser.bars[0].Time >= keep-slack {
		return
	}
	i := sort.Search(len(ser.bars), func(i int) bool { return ser.bars[i].Time >= keep })
	ser.bars = append(ser.bars[:0:0], ser.bars[i:]...)
}

// Put stores a bar: it replaces a bar of the same time (Fill does not).
func (s *Store) Put(symbol string, res market.Resolution, b market.Bar) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(symbol, res, b)
}

func (s *Store) put(symbol string, res market.Resolution, b market.Bar) {
	all := s.series[symbol]
	if all == nil {
		all = &[3]series{}
		s.series[symbol] = all
	}
	ser := &all[res]
	n := len(ser.bars)
	if n == 0 || ser.bars[n-1].Time < b.Time {
		ser.bars = append(ser.bars, b)
		return
	}
	i := sort.Search(n, func(i int) bool { return ser.bars[i].Time >= b.Time })
	if ser.bars[i].Time == b.Time {
		ser.bars[i] = b
		return
	}
	ser.bars = append(ser.bars, market.Bar{})
	copy(ser.bars[i+1:], ser.bars[i:])
	ser.bars[i] = b
}

// Fill is Put for a bar of the stored history: it never replaces a bar
// the store holds at that time (the live feed's, which is newer).
func (s *Store) Fill(symbol string, res market.Resolution, b market.Bar) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if all := s.series[symbol]; all != nil {
		bars := all[res].bars
		i := sort.Search(len(bars), func(i int) bool { return bars[i].Time >= b.Time })
		if i < len(bars) && bars[i].Time == b.Time {
			return
		}
	}
	s.put(symbol, res, b)
}

// FlushOpen saves every newest bar that changed since it was last saved.
func (s *Store) FlushOpen() {
	if s.saver == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for sym, all := range s.series {
		for _, res := range market.Resolutions {
			ser := &all[res]
			if n := len(ser.bars); n > 0 && (ser.openDirty || res == market.Second) {
				s.saver.Save(sym, res, ser.bars[n-1])
				ser.openDirty = false
			}
		}
	}
}

// Symbols lists the symbols with bars.
func (s *Store) Symbols() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.series))
	for sym := range s.series {
		out = append(out, sym)
	}
	sort.Strings(out)
	return out
}

func copyBar(dst *market.Bar, src *market.Bar) {
	dst.Time = src.Time
	dst.Open.Set(&src.Open)
	dst.High.Set(&src.High)
	dst.Low.Set(&src.Low)
	dst.Close.Set(&src.Close)
	dst.Volume.Set(&src.Volume)
}

// History returns up to countBack bars of symbol at tf opening before to (Unix
// seconds; 0: no bound), oldest first. Buckets without ticks are absent.
func (s *Store) History(symbol string, tf market.Timeframe, countBack int, to int64) []market.Bar {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.history(symbol, tf, countBack, to, true)
}

// history answers History with s.mu held; without copy, bars at a stored
// resolution are the store's own (read them only while the lock is held).
func (s *Store) history(symbol string, tf market.Timeframe, countBack int, to int64, copyOut bool) []market.Bar {
	all := s.series[symbol]
	if all == nil || countBack <= 0 {
		return nil
	}
	bars := all[tf.Base()].bars
	end := len(bars)
	if to > 0 {
		end = sort.Search(len(bars), func(i int) bool { return tf.Bucket(bars[i].Time) >= to })
	}
	if tf.Seconds() == tf.Base().Seconds() { // the stored resolution itself
		start := max(0, end-countBack)
		if !copyOut {
			return bars[start:end:end]
		}
		out := make([]market.Bar, end-start)
		for i := start; i < end; i++ {
			copyBar(&out[i-start], &bars[i])
		}
		return out
	}
	out := make([]market.Bar, 0, min(countBack, 1024))
	for i := end - 1; i >= 0; i-- {
		b := tf.Bucket(bars[i].Time)
		if n := len(out); n > 0 && out[n-1].Time == b {
			// walking backwards: bars[i] is earlier, so it sets the open
			cur := &out[n-1]
			cur.Open.Set(&bars[i].Open)
			if bars[i].High.Cmp(&cur.High) > 0 {
				cur.High.Set(&bars[i].High)
			}
			if bars[i].Low.Cmp(&cur.Low) < 0 {
				cur.Low.Set(&bars[i].Low)
			}
			_, _ = apd.BaseContext.Add(&cur.Volume, &cur.Volume, &bars[i].Volume)
			continue
		}
		if len(out) == countBack {
			break
		}
		var nb market.Bar
		copyBar(&nb, &bars[i])
		nb.Time = b
		out = append(out, nb)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// SpreadHistory returns up to countBack bars of the expression e at tf opening
// before to, over the buckets where every leg has a bar. Each of open, high,
// low and close is the expression over the legs' same field; the bar's high and
// low are the largest and smallest of the four; volume is 0. Buckets where the
// expression is undefined (division by zero) are left out.
func (s *Store) SpreadHistory(e *spread.Expr, tf market.Timeframe, countBack int, to int64) []market.Bar {
	if countBack <= 0 {
		return nil
	}
	ev := NewSpreadEval(e)
	want := countBack
	s.mu.RLock()
	defer s.mu.RUnlock()
	for {
		legs := make([][]market.Bar, len(e.Legs))
		exhausted := true
		for i, l := range e.Legs {
			legs[i] = s.history(l, tf, want, to, false)
			if len(legs[i]) == want {
				exhausted = false
			}
		}
		out := ev.Intersect(legs)
		if len(out) >= countBack || exhausted || want >= 16*countBack {
			if len(out) > countBack {
				out = out[len(out)-countBack:]
			}
			return out
		}
		want *= 2
	}
}

// SpreadEval evaluates an expression over the legs' bars.
type SpreadEval struct {
	e    *spread.Expr
	ev   *spread.Evaluator
	args []*apd.Decimal
	vals [4]apd.Decimal
}

// NewSpreadEval prepares the evaluation of e. Not safe for concurrent use.
func NewSpreadEval(e *spread.Expr) *SpreadEval {
	return &SpreadEval{e: e, ev: spread.NewEvaluator(e), args: make([]*apd.Decimal, len(e.Legs))}
}

// Intersect evaluates the expression over the buckets present in every leg
// (each leg ascending by time), ascending. Long answers are evaluated on
// several cores.
func (se *SpreadEval) Intersect(legs [][]market.Bar) []market.Bar {
	if len(legs) == 0 {
		return nil
	}
	// align: the index of each leg's bar at every common time
	n := len(legs)
	idx := make([]int, n)
	var rows []int // n indexes per common bucket
	for {
		var t int64
		for i, l := range legs {
			if idx[i] >= len(l) {
				return se.evalRows(legs, rows)
			}
			if i == 0 || l[idx[i]].Time > t {
				t = l[idx[i]].Time
			}
		}
		aligned := true
		for i, l := range legs {
			for idx[i] < len(l) && l[idx[i]].Time < t {
				idx[i]++
			}
			if idx[i] >= len(l) {
				return se.evalRows(legs, rows)
			}
			if l[idx[i]].Time != t {
				aligned = false
			}
		}
		if !aligned {
			continue
		}
		rows = append(rows, idx...)
		for i := range idx {
			idx[i]++
		}
	}
}

// parallelRows is the answer length from which evaluation is split across cores.
const parallelRows = 1024

func (se *SpreadEval) evalRows(legs [][]market.Bar, rows []int) []market.Bar {
	n := len(legs)
	count := len(rows) / n
	out := make([]market.Bar, count)
	ok := make([]bool, count)
	run := func(ev *SpreadEval, from, to int) {
		for k := from; k < to; k++ {
			ix := rows[k*n : k*n+n]
			if ev.eval(&out[k], legs, ix) {
				out[k].Time = legs[0][ix[0]].Time
				ok[k] = true
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 4)
	if count < parallelRows || workers < 2 {
		run(se, 0, count)
	} else {
		var wg sync.WaitGroup
		chunk := (count + workers - 1) / workers
		for w := 0; w < workers; w++ {
			from, to := w*chunk, min(count, (w+1)*chunk)
			ev := se
			if w > 0 {
				ev = NewSpreadEval(se.e)
			}
			wg.Add(1)
			go func() { defer wg.Done(); run(ev, from, to) }()
		}
		wg.Wait()
	}
	kept := out[:0]
	for k := range out {
		if ok[k] {
			kept = append(kept, out[k])
		}
	}
	return kept
}

// eval sets b's prices from the legs' bars at idx; false when undefined.
func (se *SpreadEval) eval(b *market.Bar, legs [][]market.Bar, idx []int) bool {
	field := func(dst *apd.Decimal, pick func(*market.Bar) *apd.Decimal) bool {
		for i := range legs {
			se.args[i] = pick(&legs[i][idx[i]])
		}
		return se.ev.Eval(dst, se.args) == nil
	}
	if !field(&se.vals[0], func(x *market.Bar) *apd.Decimal { return &x.Open }) ||
		!field(&se.vals[1], func(x *market.Bar) *apd.Decimal { return &x.High }) ||
		!field(&se.vals[2], func(x *market.Bar) *apd.Decimal { return &x.Low }) ||
		!field(&se.vals[3], func(x *market.Bar) *apd.Decimal { return &x.Close }) {
		return false
	}
	b.Open.Set(&se.vals[0])
	b.Close.Set(&se.vals[3])
	hi, lo := &se.vals[0], &se.vals[0]
	for i := 1; i < 4; i++ {
		if se.vals[i].Cmp(hi) > 0 {
			hi = &se.vals[i]
		}
		if se.vals[i].Cmp(lo) < 0 {
			lo = &se.vals[i]
		}
	}
	b.High.Set(hi)
	b.Low.Set(lo)
	return true
}
