// Package storetest is the one contract suite of projections.Store: every
// implementation runs Run with a factory of empty stores, and BenchCore
// measures how many commits per second the core fold sustains on it.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/events"
	"github.com/svc/engine/projections"
)

// Factory opens an empty store for one test or benchmark; it registers its
// own cleanup.
type Factory func(t testing.TB) projections.Store

// Record exercises every kind of value the read models keep.
type Record struct {
	Name     string            `json:"name"`
	Note     string            `json:"note,omitempty"`
	N        int64             `json:"n"`
	Big      uint64            `json:"big"`
	OK       bool              `json:"ok"`
	Amount   events.Decimal    `json:"amount"`
	Limit    *events.Decimal   `json:"limit"`
	Stop     *events.Decimal   `json:"stop,omitempty"`
	At       time.Time         `json:"at"`
	Zoned    time.Time         `json:"zoned"`
	Tags     []string          `json:"tags"`
	Attrs    map[string]string `json:"attrs"`
	Child    *Record           `json:"child,omitempty"`
	Internal uint64            `json:"-"` // kept: a record is more than its API shape
}

var ctx = context.Background()

func put(t *testing.T, s projections.Store, seq uint64, coll string, kv ...any) {
	t.Helper()
	err := s.Update(ctx, seq, func(tx projections.Tx) error {
		for i := 0; i < len(kv); i += 2 {
			if err := tx.Put(coll, kv[i].(string), kv[i+1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("update %d: %v", seq, err)
	}
}

func get[T any](t *testing.T, s projections.Store, coll, key string) (T, bool) {
	t.Helper()
	var v T
	ok, err := s.Get(ctx, coll, key, &v)
	if err != nil {
		t.Fatalf("get %s/%s: %v", coll, key, err)
	}
	return v, ok
}

func checkpoint(t *testing.T, s projections.Store) uint64 {
	t.Helper()
	cp, err := s.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func keys(t *testing.T, s projections.Store, coll string, q projections.Query) []string {
	t.Helper()
	out := []string{}
	err := s.List(ctx, coll, q, func(k string, decode func(any) error) error {
		var v string
		if err := decode(&v); err != nil {
			return err
		}
		if v != "v:"+k {
			return fmt.Errorf("key %q holds %q", k, v)
		}
		out = append(out, k)
		return nil
	})
	if err != nil {
		t.Fatalf("list %+v: %v", q, err)
	}
	return out
}

func count(t *testing.T, s projections.Store, coll, prefix string) int {
	t.Helper()
	n, err := s.Count(ctx, coll, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func dec(s string) events.Decimal { return events.MustDecimal(s) }

func decp(s string) *events.Decimal { d := dec(s); return &d }

// stored is a decimal as a store may hold it: a computed value, read within
// the codec's bounds rather than the API's.
func stored(s string) events.Decimal {
	var d events.Decimal
	if err := events.UnmarshalStored([]byte(`"`+s+`"`), &d); err != nil {
		panic(err)
	}
	return d
}

// sameRecord compares what a reader of r can see: every field's JSON, the
// hidden field, decimals by value and digits, times by instant and offset.
func sameRecord(t *testing.T, got, want Record) {
	t.Helper()
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Errorf("record read back differs:\n got %s\nwant %s", gj, wj)
	}
	if got.Internal != want.Internal {
		t.Errorf("json:\"-\" field: got %d, want %d", got.Internal, want.Internal)
	}
	if got.Amount.Cmp(want.Amount) != 0 || got.Amount.String() != want.Amount.String() {
		t.Errorf("amount %s, want %s", got.Amount, want.Amount)
	}
	if (got.Limit == nil) != (want.Limit == nil) || (got.Limit != nil && got.Limit.Cmp(*want.Limit) != 0) {
		t.Errorf("limit %v, want %v", got.Limit, want.Limit)
	}
	if want.Stop == nil && got.Stop != nil {
		t.Errorf("nil *Decimal read back as %v", got.Stop)
	}
	if !got.At.Equal(want.At) || got.At.Location() != time.UTC {
		t.Errorf("at %v (%v), want %v in UTC", got.At, got.At.Location(), want.At)
	}
	_, go1 := got.Zoned.Zone()
	_, wo := want.Zoned.Zone()
	if !got.Zoned.Equal(want.Zoned) || go1 != wo {
		t.Errorf("zoned %v, want %v", got.Zoned, want.Zoned)
	}
}

func sample() Record {
	return Record{
		Name:     "ünïcode \"quoted\" \\ <tag> & \u2028",
		N:        -42,
		Big:      1<<63 + 12345, // above float64 precision: must not pass through a float
		OK:       true,
		Amount:   stored("1234567890123456789012.123456789012"), // 34 digits, beyond the API's input bounds
		Limit:    decp("-0.000000001"),
		At:       time.Date(2024, 2, 29, 23, 59, 59, 123456789, time.UTC),
		Zoned:    time.Date(2024, 6, 1, 9, 30, 0, 1, time.FixedZone("X", 2*3600+30*60)),
		Tags:     []string{"b", "a", ""},
		Attrs:    map[string]string{"z": "1", "a": "2"},
		Child:    &Record{Name: "child", Amount: dec("0"), Tags: []string{}, At: time.Unix(0, 0).UTC(), Zoned: time.Unix(0, 0).UTC()},
		Internal: 987654321,
	}
}

// Run runs the contract suite; each subtest gets a fresh store from open.
func Run(t *testing.T, open Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, projections.Store)
	}{
		{"EmptyStore", testEmpty},
		{"ValuesRoundTrip", testRoundTrip},
		{"OrderKeepsHiddenFields", testOrder},
		{"GetReplacesTarget", testGetReplaces},
		{"PutOverwritesDeleteRemoves", testOverwriteDelete},
		{"TxSeesItsOwnWrites", testTxOwnWrites},
		{"InsertedDocuments", testInsert},
		{"FailingUpdateChangesNothing", testRollback},
		{"CheckpointSkipsOldSequences", testCheckpoint},
		{"BindsToOneLog", testBind},
		{"CollectionsAreSeparate", testCollections},
		{"ListOrderAndQueries", testList},
		{"ListPagesAndNestedReads", testListLarge},
		{"ListCallbackErrorStops", testListStop},
		{"Count", testCount},
		{"LargeUpdate", testLargeUpdate},
		{"ConcurrentReadersSeeCommittedState", testConcurrent},
		{"ReadsShowDerivedStops", testDerivedStops},
		{"ViewReadsOneMoment", testView},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func testEmpty(t *testing.T, s projections.Store) {
	if cp := checkpoint(t, s); cp != 0 {
		t.Fatalf("checkpoint of an empty store: %d", cp)
	}
	if _, ok := get[string](t, s, "c", "k"); ok {
		t.Fatal("found a document in an empty store")
	}
	if ks := keys(t, s, "c", projections.Query{}); len(ks) != 0 {
		t.Fatalf("listed %v", ks)
	}
	if n := count(t, s, "c", ""); n != 0 {
		t.Fatalf("count %d", n)
	}
	if _, err := projections.GetInto[Record](ctx, s, "c", "k"); !errors.Is(err, projections.ErrNotFound) {
		t.Fatalf("GetInto of a missing key: %v", err)
	}
}

func testRoundTrip(t *testing.T, s projections.Store) {
	want := sample()
	ptr := sample()
	ptr.Name = "by pointer"
	put(t, s, 1, "rec", "r1", want, "r2", &ptr)
	got, ok := get[Record](t, s, "rec", "r1")
	if !ok {
		t.Fatal("r1 missing")
	}
	sameRecord(t, got, want)
	sameRecord(t, *got.Child, *want.Child)
	if got.Stop != nil {
		t.Fatal("nil *Decimal came back non-nil")
	}
	got2, ok := get[Record](t, s, "rec", "r2")
	if !ok || got2.Name != "by pointer" {
		t.Fatalf("Put of a pointer stores the pointee: %+v %v", got2, ok)
	}
	// Read inside a later transaction too.
	err := s.Update(ctx, 2, func(tx projections.Tx) error {
		var r Record
		if ok, err := tx.Get("rec", "r1", &r); err != nil || !ok {
			return fmt.Errorf("tx get: %v %v", ok, err)
		}
		sameRecord(t, r, want)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Plain values.
	put(t, s, 3, "plain", "s", "text", "d", dec("-0.5"), "n", 7, "m", map[string]int{"a": 1})
	if v, _ := get[string](t, s, "plain", "s"); v != "text" {
		t.Fatalf("string %q", v)
	}
	if v, _ := get[events.Decimal](t, s, "plain", "d"); v.String() != "-0.5" {
		t.Fatalf("decimal %s", v)
	}
	if v, _ := get[int](t, s, "plain", "n"); v != 7 {
		t.Fatalf("int %d", v)
	}
	if v, _ := get[map[string]int](t, s, "plain", "m"); v["a"] != 1 || len(v) != 1 {
		t.Fatalf("map %v", v)
	}
	all, err := projections.ListInto[Record](ctx, s, "rec", projections.Query{})
	if err != nil || len(all) != 2 {
		t.Fatalf("ListInto: %d %v", len(all), err)
	}
	sameRecord(t, all[0], want)
}

// testOrder pins what the order fold relies on: an order's Seq and AccountID,
// kept out of the API's JSON, survive the store.
func testOrder(t *testing.T, s projections.Store) {
	o := projections.Order{AccountID: "acc", BrokerOrderID: "o1", ClientOrderID: "c1", Instrument: "BTC-PERP",
		Side: "buy", OrderType: "limit", Quantity: dec("0.50"), LimitPrice: decp("64998.50"), TimeInForce: "gtc",
		State: "working", FilledQuantity: dec("0"), CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), Seq: 77}
	o.UpdatedAt = o.CreatedAt
	put(t, s, 1, projections.CollOrder, "acc/o1", o)
	got, ok := get[projections.Order](t, s, projections.CollOrder, "acc/o1")
	if !ok {
		t.Fatal("order missing")
	}
	if got.Seq != 77 || got.AccountID != "acc" {
		t.Fatalf("hidden fields: seq %d account %q", got.Seq, got.AccountID)
	}
	if got.AvgFillPrice != nil || got.StopPrice != nil || got.LimitPrice.String() != "64998.5" || got.Quantity.Cmp(dec("0.5")) != 0 {
		t.Fatalf("order read back %+v", got)
	}
}

func testGetReplaces(t *testing.T, s projections.Store) {
	put(t, s, 1, "rec", "plain", Record{Name: "plain", Amount: dec("1")})
	dirty := sample()
	dirty.Note = "stale"
	ok, err := s.Get(ctx, "rec", "plain", &dirty)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if dirty.Note != "" || dirty.Limit != nil || dirty.Tags != nil || dirty.Child != nil || dirty.Internal != 0 || dirty.Name != "plain" {
		t.Fatalf("Get left stale fields: %+v", dirty)
	}
	// A miss leaves the target alone.
	keep := Record{Name: "keep"}
	if ok, err := s.Get(ctx, "rec", "missing", &keep); ok || err != nil || keep.Name != "keep" {
		t.Fatalf("miss: %v %v %+v", ok, err, keep)
	}
	var notPtr Record
	if _, err := s.Get(ctx, "rec", "plain", notPtr); err == nil {
		t.Fatal("Get into a non-pointer succeeded")
	}
}

func testOverwriteDelete(t *testing.T, s projections.Store) {
	put(t, s, 1, "c", "a", "v:a", "b", "v:b")
	put(t, s, 2, "c", "a", "v2")
	if v, _ := get[string](t, s, "c", "a"); v != "v2" {
		t.Fatalf("overwrite: %q", v)
	}
	err := s.Update(ctx, 3, func(tx projections.Tx) error {
		if err := tx.Delete("c", "a"); err != nil {
			return err
		}
		return tx.Delete("c", "never-existed")
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := get[string](t, s, "c", "a"); ok {
		t.Fatal("deleted key still there")
	}
	if ks := keys(t, s, "c", projections.Query{}); !slices.Equal(ks, []string{"b"}) {
		t.Fatalf("after delete: %v", ks)
	}
	// Delete then Put in one transaction: the Put wins; Put then Delete: gone.
	err = s.Update(ctx, 4, func(tx projections.Tx) error {
		if err := tx.Delete("c", "b"); err != nil {
			return err
		}
		if err := tx.Put("c", "b", "v:b"); err != nil {
			return err
		}
		if err := tx.Put("c", "x", "v:x"); err != nil {
			return err
		}
		return tx.Delete("c", "x")
	})
	if err != nil {
		t.Fatal(err)
	}
	if ks := keys(t, s, "c", projections.Query{}); !slices.Equal(ks, []string{"b"}) {
		t.Fatalf("after delete+put: %v", ks)
	}
}

func testTxOwnWrites(t *testing.T, s projections.Store) {
	put(t, s, 1, "c", "old", "v:old", "gone", "v:gone")
	err := s.Update(ctx, 2, func(tx projections.Tx) error {
		var v string
		if ok, err := tx.Get("c", "new", &v); err != nil || ok {
			return fmt.Errorf("new before put: %v %v", ok, err)
		}
		if err := tx.Put("c", "new", "first"); err != nil {
			return err
		}
		if ok, err := tx.Get("c", "new", &v); err != nil || !ok || v != "first" {
			return fmt.Errorf("own put: %q %v %v", v, ok, err)
		}
		if err := tx.Put("c", "new", "second"); err != nil {
			return err
		}
		if ok, err := tx.Get("c", "new", &v); err != nil || !ok || v != "second" {
			return fmt.Errorf("own overwrite: %q %v %v", v, ok, err)
		}
		if ok, err := tx.Get("c", "old", &v); err != nil || !ok || v != "v:old" {
			return fmt.Errorf("committed doc: %q %v %v", v, ok, err)
		}
		if err := tx.Put("c", "old", "changed"); err != nil {
			return err
		}
		if ok, err := tx.Get("c", "old", &v); err != nil || !ok || v != "changed" {
			return fmt.Errorf("own change of a committed doc: %q %v %v", v, ok, err)
		}
		if err := tx.Delete("c", "gone"); err != nil {
			return err
		}
		if ok, err := tx.Get("c", "gone", &v); err != nil || ok {
			return fmt.Errorf("own delete: %v %v", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A Put copies the value: changing the variable afterwards changes nothing.
	r := Record{Name: "before", Amount: dec("1")}
	err = s.Update(ctx, 3, func(tx projections.Tx) error {
		if err := tx.Put("rec", "r", r); err != nil {
			return err
		}
		r.Name = "after"
		var got Record
		if ok, err := tx.Get("rec", "r", &got); err != nil || !ok || got.Name != "before" {
			return fmt.Errorf("own put after the variable changed: %q %v %v", got.Name, ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := get[Record](t, s, "rec", "r"); got.Name != "before" {
		t.Fatalf("committed %q", got.Name)
	}
	// A record can be put as a pointer to it; it reads back as the record,
	// and what a reader got is its own to change.
	err = s.Update(ctx, 4, func(tx projections.Tx) error {
		p := &Record{Name: "by pointer", Amount: dec("2.5")}
		if err := tx.Put("rec", "p", p); err != nil {
			return err
		}
		var got Record
		if ok, err := tx.Get("rec", "p", &got); err != nil || !ok || got.Name != "by pointer" {
			return fmt.Errorf("own put by pointer: %+v %v %v", got, ok, err)
		}
		got.Name = "changed by a reader"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := get[Record](t, s, "rec", "p"); got.Name != "by pointer" || got.Amount.Cmp(dec("2.5")) != 0 {
		t.Fatalf("committed by pointer: %+v", got)
	}
	if v, _ := get[string](t, s, "c", "new"); v != "second" {
		t.Fatalf("committed %q", v)
	}
	if v, _ := get[string](t, s, "c", "old"); v != "changed" {
		t.Fatalf("committed %q", v)
	}
}

// projections.Insert: a document the transaction creates reads and
// rewrites as a Put, a delete of it leaves nothing, hidden fields are kept,
// and a key that turns out to be taken after all is written as Put writes
// it, with every other write of the same transaction; a later Put of an
// inserted document overwrites it.
func testInsert(t *testing.T, s projections.Store) {
	o := projections.Order{AccountID: "acc", BrokerOrderID: "o1", Instrument: "BTC-PERP", Side: "buy",
		OrderType: "market", Quantity: dec("1"), State: "new", Seq: 41}
	err := s.Update(ctx, 1, func(tx projections.Tx) error {
		if err := projections.Insert(tx, "c", "a", "v1"); err != nil {
			return err
		}
		var v string
		if ok, err := tx.Get("c", "a", &v); err != nil || !ok || v != "v1" {
			return fmt.Errorf("own insert: %q %v %v", v, ok, err)
		}
		if err := tx.Put("c", "a", "v2"); err != nil {
			return err
		}
		if err := projections.Insert(tx, "c", "b", "vb"); err != nil {
			return err
		}
		if err := tx.Delete("c", "b"); err != nil {
			return err
		}
		if ok, err := tx.Get("c", "b", &v); err != nil || ok {
			return fmt.Errorf("own insert, then delete: %v %v", ok, err)
		}
		return projections.Insert(tx, projections.CollOrder, "acc/o1", o)
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := get[string](t, s, "c", "a"); v != "v2" {
		t.Fatalf("inserted, then rewritten: %q", v)
	}
	if _, ok := get[string](t, s, "c", "b"); ok {
		t.Fatal("inserted, then deleted: still there")
	}
	if got, ok := get[projections.Order](t, s, projections.CollOrder, "acc/o1"); !ok || got.Seq != 41 || got.State != "new" {
		t.Fatalf("inserted order: %+v %v", got, ok)
	}

	// The key is taken: the insert's promise is broken, and nothing is lost.
	err = s.Update(ctx, 2, func(tx projections.Tx) error {
		if err := projections.Insert(tx, "c", "d", "vd"); err != nil {
			return err
		}
		return projections.Insert(tx, "c", "a", "v3")
	})
	if err != nil {
		t.Fatalf("insert of a taken key: %v", err)
	}
	if v, _ := get[string](t, s, "c", "a"); v != "v3" {
		t.Fatalf("insert of a taken key wrote %q, want v3", v)
	}
	if v, _ := get[string](t, s, "c", "d"); v != "vd" {
		t.Fatalf("the same transaction's insert beside it wrote %q, want vd", v)
	}
	if cp := checkpoint(t, s); cp != 2 {
		t.Fatalf("checkpoint %d, want 2", cp)
	}

	// A later transaction's Put and Delete of inserted documents.
	o.State = "filled"
	err = s.Update(ctx, 3, func(tx projections.Tx) error {
		var got projections.Order
		if ok, err := tx.Get(projections.CollOrder, "acc/o1", &got); err != nil || !ok {
			return fmt.Errorf("inserted order in a later transaction: %v %v", ok, err)
		}
		if err := tx.Put(projections.CollOrder, "acc/o1", o); err != nil {
			return err
		}
		if err := tx.Put("c", "d", "vd2"); err != nil {
			return err
		}
		return tx.Delete("c", "a")
	})
	if err != nil {
		t.Fatalf("put over inserted documents: %v", err)
	}
	if got, _ := get[projections.Order](t, s, projections.CollOrder, "acc/o1"); got.State != "filled" || got.Seq != 41 {
		t.Fatalf("order after a later put: %+v", got)
	}
	if v, _ := get[string](t, s, "c", "d"); v != "vd2" {
		t.Fatalf("after a later put: %q", v)
	}
	if _, ok := get[string](t, s, "c", "a"); ok {
		t.Fatal("deleted in a later transaction: still there")
	}
}

func testRollback(t *testing.T, s projections.Store) {
	put(t, s, 5, "c", "a", "v:a", "b", "v:b")
	boom := errors.New("boom")
	err := s.Update(ctx, 6, func(tx projections.Tx) error {
		if err := tx.Put("c", "a", "changed"); err != nil {
			return err
		}
		if err := tx.Delete("c", "b"); err != nil {
			return err
		}
		if err := tx.Put("c", "c", "v:c"); err != nil {
			return err
		}
		if err := tx.Put("other", "z", "v:z"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want fn's error", err)
	}
	if cp := checkpoint(t, s); cp != 5 {
		t.Fatalf("checkpoint moved to %d", cp)
	}
	if ks := keys(t, s, "c", projections.Query{}); !slices.Equal(ks, []string{"a", "b"}) {
		t.Fatalf("keys after rollback: %v", ks)
	}
	if v, _ := get[string](t, s, "c", "a"); v != "v:a" {
		t.Fatalf("a after rollback: %q", v)
	}
	if n := count(t, s, "other", ""); n != 0 {
		t.Fatalf("other collection after rollback: %d", n)
	}
	// The next transaction reads the state before the failed one, then the
	// same sequence applies.
	err = s.Update(ctx, 6, func(tx projections.Tx) error {
		var v string
		if ok, err := tx.Get("c", "a", &v); err != nil || !ok || v != "v:a" {
			return fmt.Errorf("a after rollback, in a tx: %q %v %v", v, ok, err)
		}
		if ok, err := tx.Get("c", "b", &v); err != nil || !ok {
			return fmt.Errorf("b after rollback, in a tx: %v %v", ok, err)
		}
		if ok, err := tx.Get("c", "c", &v); err != nil || ok {
			return fmt.Errorf("c after rollback, in a tx: %v %v", ok, err)
		}
		return tx.Put("c", "c", "v:c")
	})
	if err != nil {
		t.Fatal(err)
	}
	if cp := checkpoint(t, s); cp != 6 {
		t.Fatalf("checkpoint %d", cp)
	}
}

func testCheckpoint(t *testing.T, s projections.Store) {
	put(t, s, 10, "c", "a", "v:a")
	if cp := checkpoint(t, s); cp != 10 {
		t.Fatalf("checkpoint %d", cp)
	}
	for _, seq := range []uint64{10, 9, 1} {
		called := false
		err := s.Update(ctx, seq, func(tx projections.Tx) error {
			called = true
			return tx.Put("c", "a", "overwritten")
		})
		if err != nil || called {
			t.Fatalf("Update(%d) at checkpoint 10: err %v, fn called %v", seq, err, called)
		}
	}
	if v, _ := get[string](t, s, "c", "a"); v != "v:a" {
		t.Fatalf("skipped update wrote %q", v)
	}
	// Sequences may skip; an empty update still advances the checkpoint.
	if err := s.Update(ctx, 1000, func(projections.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if cp := checkpoint(t, s); cp != 1000 {
		t.Fatalf("checkpoint %d", cp)
	}
	big := uint64(1) << 62
	put(t, s, big, "c", "b", "v:b")
	if cp := checkpoint(t, s); cp != big {
		t.Fatalf("checkpoint %d, want %d", cp, big)
	}
}

// A store binds to the first log it is bound to and keeps it: binding to
// another later changes nothing, and the binding is independent of the
// checkpoint and the documents.
func testBind(t *testing.T, s projections.Store) {
	logID := func() string {
		t.Helper()
		id, err := s.LogID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	bind := func(id string) string {
		t.Helper()
		got, err := s.Bind(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if id := logID(); id != "" {
		t.Fatalf("a new store is bound to %q", id)
	}
	if got := bind(""); got != "" {
		t.Fatalf("Bind(\"\") bound the store to %q", got)
	}
	put(t, s, 3, "c", "a", "v:a") // a store from before logs had ids: documents, no binding
	if got := bind("01LOGA"); got != "01LOGA" || logID() != "01LOGA" {
		t.Fatalf("Bind(01LOGA) = %q, LogID %q", got, logID())
	}
	if got := bind("01LOGB"); got != "01LOGA" || logID() != "01LOGA" {
		t.Fatalf("Bind(01LOGB) on a store of 01LOGA = %q, LogID %q; want it kept", got, logID())
	}
	if got := bind("01LOGA"); got != "01LOGA" {
		t.Fatalf("Bind(01LOGA) again = %q", got)
	}
	if cp := checkpoint(t, s); cp != 3 {
		t.Fatalf("binding moved the checkpoint to %d", cp)
	}
	put(t, s, 4, "c", "b", "v:b")
	if v, _ := get[string](t, s, "c", "a"); v != "v:a" || logID() != "01LOGA" {
		t.Fatalf("after an update: a = %q, log %q", v, logID())
	}
}

func testCollections(t *testing.T, s projections.Store) {
	put(t, s, 1, "one", "k", "v:k", "k2", "v:k2")
	put(t, s, 2, "two", "k", "v:k")
	put(t, s, 3, "one/", "x", "v:x") // a collection named like a prefix of another
	if n := count(t, s, "one", ""); n != 2 {
		t.Fatalf("count one: %d", n)
	}
	if ks := keys(t, s, "two", projections.Query{}); !slices.Equal(ks, []string{"k"}) {
		t.Fatalf("two: %v", ks)
	}
	err := s.Update(ctx, 4, func(tx projections.Tx) error { return tx.Delete("two", "k") })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := get[string](t, s, "one", "k"); !ok {
		t.Fatal("delete in one collection removed another's key")
	}
	if ks := keys(t, s, "one", projections.Query{}); !slices.Equal(ks, []string{"k", "k2"}) {
		t.Fatalf("one: %v", ks)
	}
}

// listKeys is a key set with the edges of byte order: case, punctuation
// around '/', a key equal to a prefix, numbers sorted as text, multi-byte runes.
var listKeys = []string{
	"A", "Z", "a", "a/", "a/1", "a/10", "a/2", "a/9", "a/~", "a/é", "a/é/x", "a/ê", "a0", "a:", "ab",
	"b", "b/1", "~", "é", "ê", "\u4e16", "\U0001F600",
}

func testList(t *testing.T, s projections.Store) {
	kv := make([]any, 0, 2*len(listKeys))
	for _, k := range listKeys {
		kv = append(kv, k, "v:"+k)
	}
	// Insert in two transactions, out of order.
	put(t, s, 1, "c", kv[len(kv)/2:]...)
	put(t, s, 2, "c", kv[:len(kv)/2]...)
	put(t, s, 3, "d", "a/5", "v:a/5") // another collection never leaks in
	sorted := slices.Clone(listKeys)
	sort.Strings(sorted)
	if !slices.Equal(sorted, listKeys) {
		t.Fatalf("test keys are not in Go order: %q", sorted)
	}
	rev := func(ks ...string) []string { slices.Reverse(ks); return ks }
	pre := func(p string) []string {
		var out []string
		for _, k := range listKeys {
			if strings.HasPrefix(k, p) {
				out = append(out, k)
			}
		}
		return out
	}
	cases := []struct {
		q    projections.Query
		want []string
	}{
		{projections.Query{}, listKeys},
		{projections.Query{Reverse: true}, rev(slices.Clone(listKeys)...)},
		{projections.Query{Prefix: "a/"}, []string{"a/", "a/1", "a/10", "a/2", "a/9", "a/~", "a/é", "a/é/x", "a/ê"}},
		{projections.Query{Prefix: "a"}, pre("a")},
		{projections.Query{Prefix: "a/1"}, []string{"a/1", "a/10"}},
		{projections.Query{Prefix: "a/é"}, []string{"a/é", "a/é/x"}},
		{projections.Query{Prefix: "\U0001F600"}, []string{"\U0001F600"}},
		{projections.Query{Prefix: "a/", Reverse: true}, rev(pre("a/")...)},
		{projections.Query{Prefix: "b"}, []string{"b", "b/1"}},
		{projections.Query{Prefix: "nothing"}, []string{}},
		{projections.Query{Prefix: "a/", Limit: 3}, []string{"a/", "a/1", "a/10"}},
		{projections.Query{Prefix: "a/", Limit: 3, Reverse: true}, []string{"a/ê", "a/é/x", "a/é"}},
		{projections.Query{Prefix: "a/", Limit: 100}, pre("a/")},
		{projections.Query{Limit: 1}, []string{"A"}},
		{projections.Query{Limit: 1, Reverse: true}, []string{"\U0001F600"}},
		// After is exclusive, in either direction, present or not.
		{projections.Query{After: "a/1"}, listKeys[slices.Index(listKeys, "a/1")+1:]},
		{projections.Query{Prefix: "a/", After: "a/1"}, []string{"a/10", "a/2", "a/9", "a/~", "a/é", "a/é/x", "a/ê"}},
		{projections.Query{Prefix: "a/", After: "a/15", Limit: 2}, []string{"a/2", "a/9"}},
		{projections.Query{Prefix: "a/", After: "a/2", Reverse: true}, []string{"a/10", "a/1", "a/"}},
		{projections.Query{Prefix: "a/", After: "a/3", Reverse: true, Limit: 2}, []string{"a/2", "a/10"}},
		{projections.Query{Prefix: "a/", After: "a/", Reverse: true}, []string{}},
		{projections.Query{Prefix: "a/", After: "a/ê"}, []string{}},
		{projections.Query{Prefix: "a/", After: "a/~"}, []string{"a/é", "a/é/x", "a/ê"}},
		{projections.Query{Prefix: "a/", After: "a/~", Reverse: true}, []string{"a/9", "a/2", "a/10", "a/1", "a/"}},
		{projections.Query{Prefix: "a/", After: "a/ê", Reverse: true}, rev(pre("a/")[:len(pre("a/"))-1]...)},
		{projections.Query{After: "b", Reverse: true, Limit: 2}, []string{"ab", "a:"}},
		// After outside the prefix's range.
		{projections.Query{Prefix: "a/", After: "a"}, pre("a/")},
		{projections.Query{Prefix: "a/", After: "0"}, pre("a/")},
		{projections.Query{Prefix: "a/", After: "a0"}, []string{}},
		{projections.Query{Prefix: "a/", After: "a", Reverse: true}, []string{}},
		{projections.Query{Prefix: "b/", After: "c", Reverse: true}, []string{"b/1"}},
		{projections.Query{Prefix: "a/", After: "b", Reverse: true}, rev(pre("a/")...)},
	}
	for _, c := range cases {
		got := keys(t, s, "c", c.q)
		if c.want == nil {
			c.want = []string{}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("List(%+v) = %q, want %q", c.q, got, c.want)
		}
	}
	// A cursor walk in pages of 4 visits every key once, both ways.
	for _, reverse := range []bool{false, true} {
		var walked []string
		after := ""
		for {
			page := keys(t, s, "c", projections.Query{Prefix: "a", After: after, Limit: 4, Reverse: reverse})
			walked = append(walked, page...)
			if len(page) < 4 {
				break
			}
			after = page[len(page)-1]
		}
		want := pre("a")
		if reverse {
			want = rev(want...)
		}
		if !slices.Equal(walked, want) {
			t.Errorf("cursor walk (reverse %v) = %q, want %q", reverse, walked, want)
		}
	}
}

func testListLarge(t *testing.T, s projections.Store) {
	const n = 700
	err := s.Update(ctx, 1, func(tx projections.Tx) error {
		for i := range n {
			k := fmt.Sprintf("acc/%05d", i)
			if err := tx.Put("big", k, "v:"+k); err != nil {
				return err
			}
		}
		return tx.Put("big", "acd", "v:acd")
	})
	if err != nil {
		t.Fatal(err)
	}
	all := keys(t, s, "big", projections.Query{Prefix: "acc/"})
	if len(all) != n || all[0] != "acc/00000" || all[n-1] != fmt.Sprintf("acc/%05d", n-1) || !slices.IsSorted(all) {
		t.Fatalf("listed %d keys", len(all))
	}
	down := keys(t, s, "big", projections.Query{Prefix: "acc/", Reverse: true, After: "acc/00650"})
	if len(down) != 650 || down[0] != "acc/00649" || down[649] != "acc/00000" {
		t.Fatalf("reverse listed %d keys", len(down))
	}
	if got := keys(t, s, "big", projections.Query{Prefix: "acc/", Limit: 300, After: "acc/00100"}); len(got) != 300 || got[299] != "acc/00400" {
		t.Fatalf("limit 300 listed %d", len(got))
	}
	// The callback may read the store, as typed reads do (Orders reads each order).
	seen := 0
	err = s.List(ctx, "big", projections.Query{Prefix: "acc/"}, func(k string, _ func(any) error) error {
		v, ok := get[string](t, s, "big", k)
		if !ok || v != "v:"+k {
			return fmt.Errorf("nested get %s: %q %v", k, v, ok)
		}
		seen++
		return nil
	})
	if err != nil || seen != n {
		t.Fatalf("nested reads: %d, %v", seen, err)
	}
}

func testListStop(t *testing.T, s projections.Store) {
	put(t, s, 1, "c", "a", "v:a", "b", "v:b", "c", "v:c")
	stop := errors.New("stop")
	var seen []string
	err := s.List(ctx, "c", projections.Query{}, func(k string, _ func(any) error) error {
		seen = append(seen, k)
		if k == "b" {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !slices.Equal(seen, []string{"a", "b"}) {
		t.Fatalf("List after callback error: %v, saw %v", err, seen)
	}
	err = s.List(ctx, "c", projections.Query{}, func(_ string, decode func(any) error) error {
		var r Record // a string is not a Record
		return decode(&r)
	})
	if err == nil {
		t.Fatal("decoding into the wrong type succeeded")
	}
}

func testCount(t *testing.T, s projections.Store) {
	kv := make([]any, 0, 2*len(listKeys))
	for _, k := range listKeys {
		kv = append(kv, k, "v:"+k)
	}
	put(t, s, 1, "c", kv...)
	for p, want := range map[string]int{"": len(listKeys), "a/": 9, "a/1": 2, "a": 13, "a/é": 2, "x": 0, "\U0001F600": 1, "é": 1} {
		if n := count(t, s, "c", p); n != want {
			t.Errorf("Count(%q) = %d, want %d", p, n, want)
		}
	}
	err := s.Update(ctx, 2, func(tx projections.Tx) error { return tx.Delete("c", "a/10") })
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "c", "a/1"); n != 1 {
		t.Fatalf("count after delete: %d", n)
	}
}

// testLargeUpdate writes, rewrites and deletes thousands of documents in one
// Update, as a batch of 512 commits does.
func testLargeUpdate(t *testing.T, s projections.Store) {
	const n = 3000
	err := s.Update(ctx, 1, func(tx projections.Tx) error {
		for i := range n {
			r := Record{Name: fmt.Sprint(i), Amount: dec(fmt.Sprintf("%d.25", i)), Internal: uint64(i)}
			if err := tx.Put("rec", fmt.Sprintf("%05d", i), r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(ctx, 2, func(tx projections.Tx) error {
		for i := 0; i < n; i += 3 {
			if err := tx.Delete("rec", fmt.Sprintf("%05d", i)); err != nil {
				return err
			}
		}
		for i := 1; i < n; i += 3 {
			k := fmt.Sprintf("%05d", i)
			var r Record
			if ok, err := tx.Get("rec", k, &r); err != nil || !ok {
				return fmt.Errorf("get %s: %v %v", k, ok, err)
			}
			r.Amount = r.Amount.Add(dec("1"))
			if err := tx.Put("rec", k, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := count(t, s, "rec", ""); c != n-n/3 {
		t.Fatalf("count %d", c)
	}
	r, ok := get[Record](t, s, "rec", "02998")
	if !ok || r.Amount.String() != "2999.25" || r.Internal != 2998 {
		t.Fatalf("rewritten record %+v", r)
	}
	if r, ok := get[Record](t, s, "rec", "02999"); !ok || r.Amount.String() != "2999.25" {
		t.Fatalf("untouched record %+v", r)
	}
}

// testConcurrent runs a writer against readers: every read sees a whole
// committed update (two documents written together agree), never half of one,
// and never one older than a read before it, whether that read was a Get or
// a List.
func testConcurrent(t *testing.T, s projections.Store) {
	const updates = 40
	var done atomic.Bool
	errc := make(chan error, 3)
	for r := range 2 {
		go func() {
			for !done.Load() {
				var a, b int
				if r == 0 {
					if _, err := s.Get(ctx, "c", "a", &a); err != nil {
						errc <- err
						return
					}
				} else if err := s.List(ctx, "c", projections.Query{Prefix: "a"}, func(_ string, decode func(any) error) error {
					return decode(&a)
				}); err != nil {
					errc <- err
					return
				}
				if _, err := s.Get(ctx, "c", "b", &b); err != nil {
					errc <- err
					return
				}
				if b < a { // b is written after a; a reader sees b >= a
					errc <- fmt.Errorf("read a=%d then b=%d", a, b)
					return
				}
			}
			errc <- nil
		}()
	}
	for i := 1; i <= updates; i++ {
		err := s.Update(ctx, uint64(i), func(tx projections.Tx) error {
			if err := tx.Put("c", "a", i); err != nil {
				return err
			}
			return tx.Put("c", "b", i)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if cp := checkpoint(t, s); cp != updates {
		t.Fatalf("checkpoint %d", cp)
	}
}

// A view (projections.Viewer) reads the read models as of one moment: an
// Update that commits while it reads shows in none of its reads (get, list,
// count, checkpoint), whether the store holds the Update back until the
// view ends (memory) or commits it beside the view's snapshot
// (PostgreSQL); once the view ends, the Update's documents show. Writes
// through the view fail.
func testView(t *testing.T, s projections.Store) {
	put(t, s, 1, "v", "k/a", Record{Name: "a", N: 1, Amount: dec("1"), Tags: []string{}}, "k/b", Record{Name: "b", N: 1, Amount: dec("1"), Tags: []string{}})
	v, ok := s.(projections.Viewer)
	if !ok {
		t.Fatalf("%T reads under no snapshot: it is not a projections.Viewer", s)
	}
	updated := make(chan error, 1)
	landed := false
	err := v.View(ctx, func(vs projections.Store) error {
		var a Record
		if ok, err := vs.Get(ctx, "v", "k/a", &a); err != nil || !ok || a.N != 1 {
			return fmt.Errorf("the view's first read: %+v %v %v", a, ok, err)
		}
		go func() {
			updated <- s.Update(ctx, 2, func(tx projections.Tx) error {
				for _, k := range []string{"k/a", "k/b", "k/c"} {
					if err := tx.Put("v", k, Record{Name: k, N: 2, Amount: dec("2"), Tags: []string{}}); err != nil {
						return err
					}
				}
				return nil
			})
		}()
		select {
		case err := <-updated: // committed beside the view's snapshot
			if err != nil {
				return fmt.Errorf("the update beside the view: %w", err)
			}
			landed = true
		case <-time.After(200 * time.Millisecond): // held back until the view ends
		}
		var b Record
		if ok, err := vs.Get(ctx, "v", "k/b", &b); err != nil || !ok || b.N != 1 {
			return fmt.Errorf("the view read k/b as %+v (found %v, %v) after an update committed: it reads no one moment", b, ok, err)
		}
		var ns []int64
		err := vs.List(ctx, "v", projections.Query{Prefix: "k/"}, func(_ string, decode func(any) error) error {
			var r Record
			if err := decode(&r); err != nil {
				return err
			}
			ns = append(ns, r.N)
			return nil
		})
		if err != nil || !slices.Equal(ns, []int64{1, 1}) {
			return fmt.Errorf("the view listed %v (%v), want [1 1]", ns, err)
		}
		if n, err := vs.Count(ctx, "v", "k/"); err != nil || n != 2 {
			return fmt.Errorf("the view counted %d (%v), want 2", n, err)
		}
		if cp, err := vs.Checkpoint(ctx); err != nil || cp != 1 {
			return fmt.Errorf("the view's checkpoint is %d (%v), want 1", cp, err)
		}
		if err := vs.Update(ctx, 3, func(projections.Tx) error { return nil }); !errors.Is(err, projections.ErrReadOnly) {
			return fmt.Errorf("an update through the view answered %v, want projections.ErrReadOnly", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !landed {
		if err := <-updated; err != nil {
			t.Fatalf("the update held back by the view: %v", err)
		}
	}
	if b, _ := get[Record](t, s, "v", "k/b"); b.N != 2 {
		t.Fatalf("after the view, k/b is %+v: the update does not show", b)
	}
	if n := count(t, s, "v", "k/"); n != 3 {
		t.Fatalf("after the view, %d documents, want 3", n)
	}
}
