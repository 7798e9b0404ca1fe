package snapshot

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/venue"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

type evBracket = evacct.Bracket

// filler sets every exported field it reaches to a value of its own: maps
// and slices get two entries (a third variant leaves some nil and some
// empty), pointers a value, decimals and times values that vary, so a field
// the encoding drops or changes shows in the comparison.
type filler struct {
	n       int
	variant int
}

var decimals = []string{"0", "1.5", "-2.25", "65000.123456789", "0.000000000000000001", "9999999999999999.999999999999999999", "-0.5", "100"}

var (
	decimalType = reflect.TypeFor[events.Decimal]()
	timeType    = reflect.TypeFor[time.Time]()
)

func (f *filler) fill(v reflect.Value, depth int) {
	f.n++
	switch v.Type() {
	case decimalType:
		v.Set(reflect.ValueOf(events.MustDecimal(decimals[f.n%len(decimals)])))
		return
	case timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(f.n) * 1001 * time.Microsecond)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", f.n))
	case reflect.Bool:
		v.SetBool(f.n%3 != 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.n) * 7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.n) * 11)
	case reflect.Pointer:
		if f.variant == 2 && f.n%4 == 0 {
			return // nil
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i), depth)
			}
		}
	case reflect.Slice:
		if f.variant == 2 {
			if f.n%2 == 0 {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0)) // empty, not nil
			}
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			f.fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		if f.variant == 2 {
			if f.n%2 == 0 {
				v.Set(m) // empty, not nil
			}
			return
		}
		for range 2 {
			k := reflect.New(v.Type().Key()).Elem()
			f.fill(k, depth+1)
			e := reflect.New(v.Type().Elem()).Elem()
			f.fill(e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	default:
		panic(fmt.Sprintf("filler: no value for a %s", v.Type()))
	}
}

// encoded is state's snapshot as a round takes it (Marshal) and makes it
// ready to store with known (Encode).
func encoded(tb testing.TB, state any, known *Segs) Encoded {
	tb.Helper()
	p, err := Marshal(state)
	if err != nil {
		tb.Fatal(err)
	}
	enc, err := p.Encode(known)
	if err != nil {
		tb.Fatal(err)
	}
	return enc
}

// roundTrip encodes a state as PutParts stores it (compressed past
// CompressAbove, its lists' full segments apart) and decodes it as Start
// does.
func roundTrip[S any](t *testing.T, s *S, compress bool) *S {
	t.Helper()
	enc := encoded(t, s, &Segs{})
	segs := map[string][]byte{}
	for _, sg := range enc.put {
		h, data := []byte(`{"format":2,"log":"L"}`), sg.data
		if compress {
			h, data = []byte(`{"format":2,"log":"L","flate":true}`), deflate(data)
		}
		segs[segKey("k", "i", sg.list, sg.k)] = append(append(h, '\n'), data...)
	}
	snap := Snap{Kind: "k", ID: "i", Rev: 1, body: enc.body, log: "L", segs: segs}
	if compress {
		snap.body, snap.flate = deflate(enc.body), true
	}
	got := new(S)
	if _, err := snap.Decode(got); err != nil {
		t.Fatal(err)
	}
	return got
}

// Every field of an account's and a venue's state survives the snapshot
// encoding: positions, working orders with prices, brackets with their
// legs, breakeven and trailing rules, risk settings, lock, latches and
// fills, the firm's halt, every idempotency record with its answer, the
// evaluation with its rows; nil and empty maps and slices stay apart.
func TestStatesRoundTripWhole(t *testing.T) {
	for variant := range 3 {
		for _, compress := range []bool{false, true} {
			f := &filler{variant: variant}
			a := account.New("acct_1")
			f.fill(reflect.ValueOf(a).Elem(), 0)
			// The clientOrderId index only Apply writes: one kept as a
			// key (a commit's sequence known), one whole.
			a.History = account.History{}
			a = account.Fold(a, 9, []events.Event{evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: "ord_k", ClientOrderID: "coid-k"}}})
			a = account.Apply(a, evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: "ord_x", ClientOrderID: "coid-x"}})
			a.History = historyOf(a)
			if variant == 0 {
				var b0 *evBracket
				for _, b := range a.Brackets {
					b0 = b
				}
				if b0 == nil || b0.Breakeven == nil || b0.Trailing == nil || len(b0.Legs) == 0 || a.Risk.Lock == nil || len(a.Risk.Fills) == 0 ||
					len(a.Eval.Rows) == 0 || len(a.Idem) == 0 || len(a.Working) == 0 || a.Eval.Resets == nil {
					t.Fatalf("the filled account lacks parts the test means to cover: %+v", a)
				}
			}
			if got := roundTrip(t, a, compress); true {
				if d := enginetest.Diff(a, got); len(d) > 0 {
					t.Errorf("variant %d, compressed %v: the account read back differs:\n%s", variant, compress, strings.Join(d, "\n"))
				}
			}
			v := venue.New("venue_1")
			f.fill(reflect.ValueOf(v).Elem(), 0)
			if got := roundTrip(t, v, compress); true {
				if d := enginetest.Diff(v, got); len(d) > 0 {
					t.Errorf("variant %d, compressed %v: the venue read back differs:\n%s", variant, compress, strings.Join(d, "\n"))
				}
			}
		}
	}
}

// historyOf is the history Apply would have kept of a's maps, in key order
// (the clientOrderId index's as Apply kept it).
func historyOf(a *account.State) account.History {
	h := account.History{Orders: a.History.Orders, OrderKeys: a.History.OrderKeys,
		ProviderOrders: a.History.ProviderOrders, ProviderKeys: a.History.ProviderKeys}
	if len(h.Orders) != 1 || len(h.OrderKeys) != 1 {
		panic("the clientOrderId index lacks the entries the test means to cover")
	}
	for _, k := range slices.Sorted(maps.Keys(a.References)) {
		h.Refs = append(h.Refs, [2]string{k, a.References[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(a.Idem)) {
		u := a.Idem[k]
		u.Key = k
		a.Idem[k] = u
		h.Keys = append(h.Keys, u)
	}
	return h
}

// A computed value past the input's bounds but within the codec's (a
// balance of 10^20) reads back: snapshots hold what folds compute.
func TestStateDecimalsReadWithinTheCodecBounds(t *testing.T) {
	a := account.New("acct_1")
	a.Balance = events.MustDecimal("1000000000000000").Mul(events.MustDecimal("100000"))
	a.Realized = events.MustDecimal("0.000000000000000001").Mul(events.MustDecimal("0.001"))
	got := roundTrip(t, a, false)
	if d := enginetest.Diff(a, got); len(d) > 0 {
		t.Errorf("differs:\n%s", strings.Join(d, "\n"))
	}
}

// The shape follows the state's type and the kind's version.
func TestShape(t *testing.T) {
	type one struct{ A string }
	type two struct {
		A string
		B int
	}
	type tagged struct {
		A string `json:"a"`
	}
	if Shape(1, one{}) == Shape(1, two{}) || Shape(1, one{}) == Shape(1, tagged{}) || Shape(1, one{}) == Shape(2, one{}) {
		t.Error("a field, a tag or a version more leaves the shape as it was")
	}
	if Shape(1, account.State{}) != Shape(1, account.State{}) {
		t.Error("the shape of one type changes from call to call")
	}
}

func openStore(t *testing.T, logID string) (*Store, jetstream.JetStream) {
	t.Helper()
	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Config{DataDir: t.TempDir(), Sync: "interval", Replicas: 1, Stream: "EVT"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	s, err := Open(ctx, Config{JS: l.JetStream(), Stream: "EVT", LogID: logID})
	if err != nil {
		t.Fatal(err)
	}
	return s, l.JetStream()
}

// A snapshot is never replaced by an older one, also by a second writer
// that does not know the newer one is there; the mark only rises.
func TestPutNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	s, js := openStore(t, "LOG1")
	shape := Shape(1, struct{ N int }{})
	if got, err := s.Put(ctx, "account", "a 1", 10, shape, []byte(`{"N":10}`)); err != nil || got != 10 {
		t.Fatalf("put at 10: %d, %v", got, err)
	}
	other, err := Open(ctx, Config{JS: js, Stream: "EVT", LogID: "LOG1"}) // a second node, knowing nothing
	if err != nil {
		t.Fatal(err)
	}
	if got, err := other.Put(ctx, "account", "a 1", 7, shape, []byte(`{"N":7}`)); err != nil || got != 10 {
		t.Fatalf("an older put answered %d, %v; want 10 kept", got, err)
	}
	if got, err := other.Put(ctx, "account", "a 1", 12, shape, []byte(`{"N":12}`)); err != nil || got != 12 {
		t.Fatalf("a newer put from the second writer answered %d, %v", got, err)
	}
	if got, err := s.Put(ctx, "account", "a 1", 11, shape, []byte(`{"N":11}`)); err != nil || got != 12 {
		t.Fatalf("the first writer's older put answered %d, %v; want 12 kept", got, err)
	}
	if err := s.PutMark(ctx, 12); err != nil {
		t.Fatal(err)
	}
	if err := other.PutMark(ctx, 9); err != nil {
		t.Fatal(err)
	}
	l, err := s.Load(ctx, 20, map[string]string{"account": shape})
	if err != nil {
		t.Fatal(err)
	}
	if l.Mark != 12 || len(l.Snaps) != 1 || l.Snaps[0].Rev != 12 || l.Snaps[0].ID != "a 1" {
		t.Fatalf("loaded mark %d and %+v; want mark 12 and a 1 at 12", l.Mark, l.Snaps)
	}
	var v struct{ N int }
	if _, err := l.Snaps[0].Decode(&v); err != nil || v.N != 12 {
		t.Fatalf("decoded %+v, %v", v, err)
	}
}

// Load uses only snapshots of this log, format and shape, within the log;
// it names the others for a rebuild, deletes those past the log's end with
// the mark, and a state too large for one message is stored without it.
func TestLoadIgnoresWhatItCannotUse(t *testing.T) {
	ctx := context.Background()
	s, js := openStore(t, "LOG1")
	shape := Shape(1, struct{ N int }{})
	put := func(st *Store, id string, rev uint64, shape string) {
		t.Helper()
		if _, err := st.Put(ctx, "account", id, rev, shape, []byte(`{"N":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	put(s, "good", 5, shape)
	put(s, "old-shape", 5, Shape(1, struct{ M int }{}))
	put(s, "future", 50, shape)
	foreign, err := Open(ctx, Config{JS: js, Stream: "EVT", LogID: "LOG2"})
	if err != nil {
		t.Fatal(err)
	}
	put(foreign, "foreign", 5, shape)
	kv, err := js.KeyValue(ctx, eventlog.SnapshotBucket("EVT"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, Key("account", "corrupt"), []byte("not a snapshot")); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 2<<20) // letters at random: compressed, still past 1 MiB
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte('a' + rng.IntN(26))
	}
	if got, err := s.Put(ctx, "account", "huge", 6, shape, append(append([]byte(`{"S":"`), big...), `"}`...)); !errors.Is(err, ErrTooLarge) || got != 6 {
		t.Fatalf("a state past the server's message size: %d, %v", got, err)
	}
	if err := s.PutMark(ctx, 8); err != nil {
		t.Fatal(err)
	}
	l, err := s.Load(ctx, 20, map[string]string{"account": shape})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Snaps) != 1 || l.Snaps[0].ID != "good" {
		t.Errorf("used %+v, want only good", l.Snaps)
	}
	var ignored []string
	for _, ig := range l.Ignored {
		ignored = append(ignored, ig.ID)
	}
	if want := []string{"corrupt", "foreign", "future", "huge", "old-shape"}; !sameSet(ignored, want) {
		t.Errorf("ignored %v, want %v", ignored, want)
	}
	if l.Mark != 0 {
		t.Errorf("mark %d used beside a snapshot past the log's end", l.Mark)
	}
	if _, err := kv.Get(ctx, Key("account", "future")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the snapshot past the log's end is still there: %v", err)
	}
	if _, err := kv.Get(ctx, markKey); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the mark is still there: %v", err)
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return len(a) == len(b)
}
