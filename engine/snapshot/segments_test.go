package snapshot

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// day0 is when the orders trade starts.
var day0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// trade folds n filled orders with a realized PnL into s, numbered from k,
// a minute apart from from: past RealizedWindow the oldest fills leave the
// window.
func trade(s *account.State, k, n int, from time.Time) *account.State {
	for i := k; i < k+n; i++ {
		at := from.Add(time.Duration(i-k) * time.Minute)
		id := fmt.Sprintf("ord_%06d", i)
		s = account.Apply(s, evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: id, ClientOrderID: fmt.Sprintf("c-%06d", i),
			Instrument: "BTC-PERP", Side: "buy", OrderType: "market", Quantity: events.Int(1), TimeInForce: "day", CreatedAt: at}})
		s = account.Apply(s, evacct.OrderFilled{BrokerOrderID: id, Done: true, Instrument: "BTC-PERP", Quantity: events.Int(1),
			Price: events.Int(100), Realized: events.Int(1), Balance: events.Int(int64(i)), At: at})
	}
	return s
}

// A round stores the segments of an account's lists that filled since the
// last one and names the others by their digests: a segment is written
// once, however many rounds follow; one the state dropped (fills past the
// window) is deleted; and each round's snapshot reads back as the state.
func TestSegmentsAreWrittenOnce(t *testing.T) {
	ctx := context.Background()
	s, js := openStore(t, "LOG1")
	kv, err := js.KeyValue(ctx, eventlog.SnapshotBucket("EVT"))
	if err != nil {
		t.Fatal(err)
	}
	shape := Shape(1, account.State{})
	known := &Segs{}
	rev := uint64(0)
	round := func(st *account.State) Encoded {
		t.Helper()
		rev++
		enc := encoded(t, st, known)
		if got, err := s.PutParts(ctx, "account", st.ID, rev, shape, enc, known); err != nil || got != rev {
			t.Fatalf("round %d: %d, %v", rev, got, err)
		}
		l, err := s.Load(ctx, rev, map[string]string{"account": shape})
		if err != nil || len(l.Snaps) != 1 {
			t.Fatalf("round %d: loaded %+v, %v", rev, l, err)
		}
		got := new(account.State)
		segs, err := l.Snaps[0].Decode(got)
		if err != nil {
			t.Fatalf("round %d: %v", rev, err)
		}
		if !reflect.DeepEqual(segs.lists, known.lists) {
			t.Fatalf("round %d: a start would know the segments %v, the writer %v", rev, segs.lists, known.lists)
		}
		if d := enginetest.Diff(st, got); len(d) > 0 {
			t.Fatalf("round %d read back differs:\n%s", rev, strings.Join(d, "\n"))
		}
		return enc
	}
	segRev := func(list string, k int) uint64 {
		t.Helper()
		e, err := kv.Get(ctx, segKey("account", "acct_1", list, k))
		if err != nil {
			t.Fatalf("segment %d of %s: %v", k, list, err)
		}
		return e.Revision()
	}
	st := trade(account.New("acct_1"), 0, 2*SegmentLen+100, day0)
	if enc := round(st); len(enc.put) != 4 { // two of the orders, two of the fills
		t.Fatalf("the first round stored %d segments, want 4", len(enc.put))
	}
	first := segRev(listName(t, st, 0), 1)
	st = trade(st, 2*SegmentLen+100, 100, day0.Add(time.Hour*36))
	if enc := round(st); len(enc.put) != 0 {
		t.Fatalf("a round that filled no segment stored %d", len(enc.put))
	}
	st = trade(st, 2*SegmentLen+200, SegmentLen, day0.Add(time.Hour*40))
	if enc := round(st); len(enc.put) != 2 {
		t.Fatalf("a round that filled one segment of each list stored %d", len(enc.put))
	}
	if segRev(listName(t, st, 0), 1) != first {
		t.Fatal("a stored segment was written again")
	}
	// Fills older than the window are dropped: once the window starts past
	// a segment, no snapshot names it and it leaves the bucket.
	st = trade(st, 3*SegmentLen+200, 1, day0.Add(account.RealizedWindow+72*time.Hour))
	round(st)
	if st.Risk.FillsFrom < 3*SegmentLen {
		t.Fatalf("the fills window starts at %d, the test needs it past the first segment", st.Risk.FillsFrom)
	}
	if _, err := kv.Get(ctx, segKey("account", "acct_1", "fills", 0)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the fills' first segment, past the window, is still there: %v", err)
	}
	// A segment gone or changed: the snapshot is not used (the start
	// rebuilds the aggregate from the log).
	if err := kv.Delete(ctx, segKey("account", "acct_1", listName(t, st, 0), 0)); err != nil {
		t.Fatal(err)
	}
	l, err := s.Load(ctx, rev, map[string]string{"account": shape})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Snaps[0].Decode(new(account.State)); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a snapshot without one of its segments decoded: %v", err)
	}
	if _, err := kv.Put(ctx, segKey("account", "acct_1", listName(t, st, 0), 0), []byte(`{"format":2,"log":"LOG1"}`+"\n[]")); err != nil {
		t.Fatal(err)
	}
	l, err = s.Load(ctx, rev, map[string]string{"account": shape})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Snaps[0].Decode(new(account.State)); err == nil || !strings.Contains(err.Error(), "not the one") {
		t.Fatalf("a snapshot with a changed segment decoded: %v", err)
	}
}

// listName is the name of the state's i-th list.
func listName(t *testing.T, st *account.State, i int) string {
	t.Helper()
	_, lists := st.SnapshotParts()
	if i >= len(lists) {
		t.Fatalf("%d lists", len(lists))
	}
	return lists[i].Name
}

// A history far longer than one message holds is snapshotted: its value
// and each segment stay under the server's size.
func TestALongHistoryIsSnapshotted(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, "LOG1")
	shape := Shape(1, account.State{})
	st := trade(account.New("acct_1"), 0, 40_000, day0)
	enc := encoded(t, st, &Segs{})
	total := len(enc.body)
	for _, sg := range enc.put {
		total += len(sg.data)
	}
	if total <= 1<<20 {
		t.Fatalf("the history is %d bytes, the test means one past a message's 1 MiB", total)
	}
	if _, err := s.PutParts(ctx, "account", "acct_1", 1, shape, enc, &Segs{}); err != nil {
		t.Fatal(err)
	}
	l, err := s.Load(ctx, 1, map[string]string{"account": shape})
	if err != nil || len(l.Snaps) != 1 || len(l.Ignored) != 0 {
		t.Fatalf("loaded %d snapshots, ignored %v: %v", len(l.Snaps), l.Ignored, err)
	}
	got := new(account.State)
	if _, err := l.Snaps[0].Decode(got); err != nil {
		t.Fatal(err)
	}
	if d := enginetest.Diff(st, got); len(d) > 0 {
		t.Fatalf("read back differs:\n%s", strings.Join(d, "\n"))
	}
}
