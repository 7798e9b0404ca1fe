package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The futures phase, tiny: two Tradovate logins linked, each client's
// market orders answered by the engine and each placement seen by the
// simulator (an order it did not see fails the phase), in both windows;
// the table carries both engine-added rows.
func TestFuturesPhaseTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an engine and the Tradovate simulator")
	}
	logTo(io.Discard, slog.LevelWarn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := opts{workers: 2, warm: 200 * time.Millisecond, dur: time.Second, sync: "interval", tmp: t.TempDir(),
		futures: futuresOpts{accounts: 2, paced: 8}}
	r, err := runFutures(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.linked != 2 || r.clients != 2 {
		t.Fatalf("linked %d, clients %d", r.linked, r.clients)
	}
	for name, w := range map[string]futWindow{"closed loop": r.loaded, "paced": r.paced} {
		if w.answer.N == 0 || w.answer.N != w.sim.N || w.answer.N != w.added.N {
			t.Fatalf("%s: %d answers, %d simulator times, %d engine-added", name, w.answer.N, w.sim.N, w.added.N)
		}
		if w.sim.P50 <= 0 || w.added.P50 <= 0 || w.answer.P50 < w.sim.P50 {
			t.Fatalf("%s: answer p50 %s, simulator p50 %s, engine-added p50 %s", name, w.answer.P50, w.sim.P50, w.added.P50)
		}
	}
	// 8 orders a second over 2 clients for 1 s: about 8 counted.
	if n := r.paced.answer.N; n < 4 || n > 9 {
		t.Fatalf("paced window counted %d orders, want about 8", n)
	}
	tb := &table{}
	futuresRows(tb, r, o)
	var text strings.Builder
	tb.print(&text, "futures")
	if !strings.Contains(text.String(), "futures order paced at 8/s") || !strings.Contains(text.String(), "closed loop") {
		t.Fatalf("table:\n%s", text.String())
	}
}
