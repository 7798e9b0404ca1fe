package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Each answered order is timed to its subscriber's first frame at the
// order's revision or a newer one (conflation), never earlier than the
// answer, and counts as missed when no frame reached it.
func TestStreamsFrameLags(t *testing.T) {
	ms := int64(time.Millisecond)
	tests := []struct {
		name          string
		got, acks     []recv
		want          []time.Duration
		exact, missed int
	}{
		{name: "every revision read", got: []recv{{rev: 5, at: 10 * ms}, {rev: 9, at: 22 * ms}, {rev: 12, at: 31 * ms}},
			acks: []recv{{rev: 9, at: 20 * ms}, {rev: 12, at: 30 * ms}},
			want: []time.Duration{2 * time.Millisecond, time.Millisecond}, exact: 2},
		{name: "two orders conflated into one newer frame", got: []recv{{rev: 5, at: 0}, {rev: 12, at: 40 * ms}},
			acks: []recv{{rev: 9, at: 20 * ms}, {rev: 12, at: 30 * ms}},
			want: []time.Duration{20 * time.Millisecond, 10 * time.Millisecond}, exact: 1},
		{name: "frame before the answer counts 0", got: []recv{{rev: 9, at: 18 * ms}},
			acks: []recv{{rev: 9, at: 20 * ms}},
			want: []time.Duration{0}, exact: 1},
		{name: "the last order never reached the subscriber", got: []recv{{rev: 9, at: 21 * ms}},
			acks: []recv{{rev: 9, at: 20 * ms}, {rev: 12, at: 30 * ms}},
			want: []time.Duration{time.Millisecond}, exact: 1, missed: 1},
		{name: "a stream with no frame after its first misses every order", got: []recv{{rev: 3, at: 0}},
			acks: []recv{{rev: 9, at: 20 * ms}, {rev: 12, at: 30 * ms}}, missed: 2},
		{name: "no orders on the account", got: []recv{{rev: 3, at: 0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lags, exact, missed := frameLags(tc.got, tc.acks)
			if !slices.Equal(lags, tc.want) || exact != tc.exact || missed != tc.missed {
				t.Fatalf("lags %v exact %d missed %d, want %v %d %d", lags, exact, missed, tc.want, tc.exact, tc.missed)
			}
		})
	}
}

// The child reads the acks the parent writes, and refuses anything else.
func TestStreamsParseAck(t *testing.T) {
	a, r, err := parseAck([]byte("ack 17 4242 1700000000123456789"))
	if err != nil || a != 17 || r.rev != 4242 || r.at != 1700000000123456789 {
		t.Fatalf("got %d %+v %v", a, r, err)
	}
	for _, bad := range []string{"", "end", "ack 1 2", "ack -1 2 3", "ack x 2 3", "ack 1 2 3 4", "nack 1 2 3"} {
		if _, _, err := parseAck([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The table shows both windows without subscribers against the one with
// them, and fails the goals the figures miss.
func TestStreamsRows(t *testing.T) {
	w := func(rate float64, cpu time.Duration) streamsWindow {
		return streamsWindow{sample: sample{Rate: rate, CPU: cpu, P50: time.Millisecond, P99: 5 * time.Millisecond}, Bytes: 34 << 10, Objects: 300}
	}
	r := streamsResult{A: w(1000, 300*time.Microsecond), B: w(900, 340*time.Microsecond), C: w(1000, 300*time.Microsecond),
		Frames: frameResult{Subs: 2000, Deliveries: 100, P50: time.Millisecond, P99: 8 * time.Millisecond, Max: 12 * time.Millisecond}}
	tb := &table{}
	streamsRows(tb, r, opts{workers: 64, streams: streamsOpts{accounts: 1000, subs: 2}})
	var text strings.Builder
	tb.print(&text, "streams")
	for _, want := range []string{"0.90x", "FAIL", "40.0", "1.00ms / 8.00ms / 12.00ms", "0 / 100"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("no %q in\n%s", want, text.String())
		}
	}
	pass := map[string]string{}
	for _, row := range tb.rows {
		pass[strings.TrimSpace(strings.SplitN(row.metric, " (", 2)[0])] = row.pass
	}
	if pass["streams: market orders over HTTP, 64 clients round robin over 1000 accounts, rate"] != "FAIL" ||
		pass["streams' engine CPU per order"] != "FAIL" || pass["frame after the order's answer p50 / p99 / max"] != "PASS" ||
		pass["frames missed / pairs measured"] != "PASS" {
		t.Fatalf("pass column %v", pass)
	}
}
