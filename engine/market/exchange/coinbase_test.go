package exchange

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/market"
)

func frames(t *testing.T, name string) [][]byte {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			out = append(out, []byte(line))
		}
	}
	return out
}

// replayServer plays recorded frames: the first connection's frames then an
// abrupt disconnect; the second's then silence (stale); the third's, then
// heartbeats. Each connection must subscribe first.
type replayServer struct {
	t     *testing.T
	conns atomic.Int64
	mu    sync.Mutex
	subs  []subscribe
	done  chan struct{}
}

func (s *replayServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	n := s.conns.Add(1)
	ctx := r.Context()
	_, data, err := c.Read(ctx)
	if err != nil {
		return
	}
	var sub subscribe
	if json.Unmarshal(data, &sub) != nil || sub.Type != "subscribe" {
		c.Close(websocket.StatusPolicyViolation, "subscribe first")
		return
	}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	script := map[int64]string{1: "session1.jsonl", 2: "session2.jsonl"}[n]
	if script == "" {
		script = "session3.jsonl"
	}
	for _, f := range frames(s.t, script) {
		if err := c.Write(ctx, websocket.MessageText, f); err != nil {
			return
		}
	}
	switch n {
	case 1:
		time.Sleep(50 * time.Millisecond)
		return // abrupt drop: CloseNow without a close frame
	case 2: // silent until the adapter gives up on it
		select {
		case <-s.done:
		case <-ctx.Done():
		}
	default: // alive: heartbeats every 100 ms until the test ends
		hb := []byte(`{"type":"heartbeat","sequence":50022,"last_trade_id":108,"product_id":"BTC-USD","time":"2024-06-03T10:00:09.200000Z"}`)
		for {
			select {
			case <-s.done:
				return
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
				if c.Write(ctx, websocket.MessageText, hb) != nil {
					return
				}
			}
		}
	}
}

func TestAdapterAgainstRecordedFrames(t *testing.T) {
	srv := &replayServer{t: t, done: make(chan struct{})}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer close(srv.done)

	feed := New(Config{URL: "ws" + strings.TrimPrefix(hs.URL, "http"), Products: map[string]string{"BTC-USD": "BTC-PERP", "ETH-USD": "ETH-PERP"},
		Stale: 400 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond})
	var mu sync.Mutex
	var got []market.Quote
	feed.Subscribe(func(q market.Quote) { mu.Lock(); got = append(got, q); mu.Unlock() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go feed.Run(ctx)

	enginetest.WaitFor(t, 10*time.Second, func() error {
		if h := feed.Health(); h.Reconnects < 2 || !h.Connected {
			return fmt.Errorf("health %+v", h)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) < 6 {
			return fmt.Errorf("%d quotes", len(got))
		}
		return nil
	})
	cancel()

	mu.Lock()
	var trades []string
	for _, q := range got {
		trades = append(trades, fmt.Sprintf("%s %s x %s bid %s ask %s", q.Instrument, q.Last, q.Size, q.Bid, q.Ask))
	}
	mu.Unlock()
	want := []string{
		"BTC-PERP 67012.34 x 0.01 bid 67012.34 ask 67012.34", // last_match, before any ticker
		"BTC-PERP 67015 x 0.25 bid 67012.33 ask 67012.35",
		"ETH-PERP 3501.2 x 1.5 bid 3501.2 ask 3501.2",
		"BTC-PERP 67010.5 x 0.1 bid 67012.33 ask 67012.35",
		// reconnect: the repeated last_match (102) is dropped; 105 skips 103 and 104
		"BTC-PERP 67020 x 0.05 bid 67012.33 ask 67012.35",
		// stale: the silent connection is dropped and redialled
		"BTC-PERP 67030 x 0.02 bid 67012.33 ask 67012.35",
	}
	if strings.Join(trades, "\n") != strings.Join(want, "\n") {
		t.Fatalf("trades:\n%s", strings.Join(trades, "\n"))
	}
	h := feed.Health()
	// gaps: 103-104 (a trade_id skip) and 106-107 (a heartbeat ahead of the trades)
	if h.Gaps != 2 || h.Missed != 4 || h.Reconnects != 2 {
		t.Fatalf("health %+v", h)
	}
	if q := got[1]; !q.At.Equal(time.Date(2024, 6, 3, 10, 0, 1, 0, time.UTC)) {
		t.Fatalf("trade time %v", q.At)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.subs) != 3 {
		t.Fatalf("%d subscriptions, want one per connection", len(srv.subs))
	}
	for _, s := range srv.subs {
		if strings.Join(s.ProductIDs, ",") != "BTC-USD,ETH-USD" || strings.Join(s.Channels, ",") != "heartbeat,ticker,matches" {
			t.Fatalf("resubscription %+v", s)
		}
	}
}

func TestStaleProductsAreReported(t *testing.T) {
	now := time.Date(2024, 6, 3, 10, 0, 0, 0, time.UTC)
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	feed := New(Config{Products: map[string]string{"BTC-USD": "BTC-PERP", "ETH-USD": "ETH-PERP"}, Stale: time.Second,
		Now: func() time.Time { return *clock.Load() }})
	if h := feed.Health(); h.Connected || len(h.Stale) != 2 {
		t.Fatalf("before connecting %+v", h)
	}
	_ = feed.handle(message{Type: "subscriptions"})
	_ = feed.handle(message{Type: "heartbeat", ProductID: "BTC-USD", LastTradeID: 1})
	later := now.Add(1500 * time.Millisecond)
	clock.Store(&later)
	_ = feed.handle(message{Type: "heartbeat", ProductID: "ETH-USD", LastTradeID: 1})
	h := feed.Health()
	if !h.Connected || strings.Join(h.Stale, ",") != "BTC-PERP" {
		t.Fatalf("health %+v", h)
	}
	if market.Served(feed, "BTC-PERP") || !market.Served(feed, "ETH-PERP") {
		t.Fatal("Served must follow staleness")
	}
	if err := feed.handle(message{Type: "error", Message: "Failed to subscribe", Reason: "BAD-USD is not a valid product"}); err == nil {
		t.Fatal("an error message ends the session")
	}
}
