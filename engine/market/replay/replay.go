// Package replay is a price feed that plays recorded trades and quotes from a
// CSV file, at the recorded pace, faster, or step by step.
//
// The file has a header naming its columns, in any order: time (RFC 3339, or
// Unix seconds or milliseconds), instrument, and either price and size (a
// trade) or bid and ask (a quote); a row may carry all four. Rows are in time
// order.
package replay

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

// Row is one recorded trade or quote.
type Row struct {
	Time       time.Time
	Instrument string
	Price      *events.Decimal // trade price; nil for a quote
	Size       *events.Decimal
	Bid, Ask   *events.Decimal // touch; nil for a bare trade
}

// Read parses a recording.
func Read(r io.Reader) ([]Row, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("replay: header: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.ToLower(strings.TrimSpace(h))] = i
	}
	for _, need := range []string{"time", "instrument"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("replay: header lacks %q", need)
		}
	}
	var rows []Row
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("replay: line %d: %w", line, err)
		}
		get := func(name string) string {
			if i, ok := col[name]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		dec := func(name string) (*events.Decimal, error) {
			s := get(name)
			if s == "" {
				return nil, nil
			}
			d, err := events.ParseDecimal(s)
			if err != nil {
				return nil, fmt.Errorf("replay: line %d: %s: %w", line, name, err)
			}
			return &d, nil
		}
		row := Row{Instrument: get("instrument")}
		if row.Time, err = parseTime(get("time")); err != nil {
			return nil, fmt.Errorf("replay: line %d: %w", line, err)
		}
		if row.Price, err = dec("price"); err != nil {
			return nil, err
		}
		if row.Size, err = dec("size"); err != nil {
			return nil, err
		}
		if row.Bid, err = dec("bid"); err != nil {
			return nil, err
		}
		if row.Ask, err = dec("ask"); err != nil {
			return nil, err
		}
		switch {
		case row.Instrument == "":
			return nil, fmt.Errorf("replay: line %d: no instrument", line)
		case row.Price == nil && (row.Bid == nil || row.Ask == nil):
			return nil, fmt.Errorf("replay: line %d: neither a trade (price) nor a quote (bid and ask)", line)
		case len(rows) > 0 && row.Time.Before(rows[len(rows)-1].Time):
			return nil, fmt.Errorf("replay: line %d: time goes backwards", line)
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil, errors.New("replay: no rows")
	}
	return rows, nil
}

// ReadFile parses a recording file.
func ReadFile(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

func parseTime(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > 1e12 {
			return time.UnixMilli(n).UTC(), nil
		}
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q is neither RFC 3339 nor Unix seconds or milliseconds", s)
	}
	return t.UTC(), nil
}

// Options shape playback.
type Options struct {
	// Speed multiplies the recorded pace; 0 plays as fast as possible.
	Speed events.Decimal
	// Rebase stamps quotes relative to the start of playback (compressed by
	// Speed) instead of with their recorded times.
	Rebase bool
	// Loop starts over at the end.
	Loop bool
	Now  func() time.Time
}

// Feed plays a recording through a Hub.
type Feed struct {
	*market.Hub
	rows   []Row
	opts   Options
	mu     sync.Mutex
	next   int
	origin time.Time // wall time of the first row of the current pass
	last   map[string]market.Quote
}

// New makes a feed over rows; nothing is published until Step or Run.
func New(rows []Row, opts Options) *Feed {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Feed{Hub: market.NewHub(), rows: rows, opts: opts, last: map[string]market.Quote{}}
}

// Name labels the feed.
func (f *Feed) Name() string { return "replay" }

// Len is the number of rows in the recording.
func (f *Feed) Len() int { return len(f.rows) }

// Step publishes the next row; false when the recording has ended (and does not loop).
func (f *Feed) Step() bool {
	f.mu.Lock()
	if f.next >= len(f.rows) {
		if !f.opts.Loop {
			f.mu.Unlock()
			return false
		}
		f.next = 0
		f.origin = time.Time{}
	}
	row := f.rows[f.next]
	f.next++
	q := f.quote(row)
	f.mu.Unlock()
	f.Publish(q)
	return true
}

// StepN publishes up to n rows and returns how many it published.
func (f *Feed) StepN(n int) int {
	done := 0
	for done < n && f.Step() {
		done++
	}
	return done
}

// stamp is the time a row is published with.
func (f *Feed) stamp(row Row) time.Time {
	if !f.opts.Rebase {
		return row.Time
	}
	if f.origin.IsZero() {
		f.origin = f.opts.Now()
	}
	elapsed := row.Time.Sub(f.rows[0].Time)
	if f.opts.Speed.Sign() > 0 {
		elapsed = f.scale(elapsed)
	}
	return f.origin.Add(elapsed)
}

func (f *Feed) quote(row Row) market.Quote {
	prev, seen := f.last[row.Instrument]
	q := market.Quote{Instrument: row.Instrument, At: f.stamp(row), Size: events.Int(0)}
	if row.Bid != nil && row.Ask != nil {
		q.Bid, q.Ask = *row.Bid, *row.Ask
	} else if seen {
		q.Bid, q.Ask = prev.Bid, prev.Ask
	} else {
		q.Bid, q.Ask = *row.Price, *row.Price
	}
	switch {
	case row.Price != nil:
		q.Last = *row.Price
		if row.Size != nil {
			q.Size = *row.Size
		}
	case seen:
		q.Last = prev.Last
	default:
		q.Last = q.Mid()
	}
	f.last[row.Instrument] = q
	return q
}

// scale divides a recorded interval by Speed, exactly, to whole nanoseconds.
func (f *Feed) scale(d time.Duration) time.Duration {
	n, err := events.Int(int64(d)).Quo(f.opts.Speed).Int64()
	if err != nil {
		return d
	}
	return time.Duration(n)
}

// Run plays the recording at Speed until it ends (unless it loops) or ctx ends.
func (f *Feed) Run(ctx context.Context) {
	for {
		f.mu.Lock()
		i := f.next
		if i >= len(f.rows) && f.opts.Loop {
			i = 0
		}
		var wait time.Duration
		if i < len(f.rows) && i > 0 && f.opts.Speed.Sign() > 0 {
			wait = f.scale(f.rows[i].Time.Sub(f.rows[i-1].Time))
		}
		f.mu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		if !f.Step() {
			return
		}
	}
}
