package memory_test

import (
	"fmt"

	"context"
	"github.com/svc/engine/events"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/memory"
	"github.com/svc/engine/projections/storetest"
)

func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(testing.TB) projections.Store { return memory.New() })
}

func BenchmarkCore(b *testing.B) {
	storetest.BenchCore(b, func(testing.TB) projections.Store { return memory.New() })
}

// The store splits keys into parts by their first segment; every query must
// still see one collection in key order, as a sorted list of every key would.
func TestPartsReadAsOneOrderedCollection(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	r := rand.New(rand.NewPCG(1, 2))
	segs := []string{"a", "ab", "a-", "b", "ab/c", "", "z"}
	var keys []string
	seen := map[string]bool{}
	for len(keys) < 300 {
		k := segs[r.IntN(len(segs))]
		if r.IntN(3) > 0 {
			k += "/" + strconv.Itoa(r.IntN(50))
		} else {
			k += strconv.Itoa(r.IntN(50))
		}
		if k == "" || seen[k] {
			continue
		}
		seen[k] = true
		keys = append(keys, k)
	}
	err := s.Update(ctx, 1, func(tx projections.Tx) error {
		for _, k := range keys {
			if err := tx.Put("c", k, k); err != nil {
				return err
			}
		}
		return tx.Delete("c", keys[0])
	})
	if err != nil {
		t.Fatal(err)
	}
	keys = keys[1:]
	slices.Sort(keys)
	prefixes := []string{"", "a", "ab", "ab/", "ab/c", "a-/", "b/1", "z", "q"}
	for i := 0; i < 500; i++ {
		q := projections.Query{Prefix: prefixes[r.IntN(len(prefixes))], Limit: r.IntN(5), Reverse: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			q.After = keys[r.IntN(len(keys))]
		}
		var want []string
		order := slices.Clone(keys)
		if q.Reverse {
			slices.Reverse(order)
		}
		for _, k := range order {
			if !strings.HasPrefix(k, q.Prefix) || (q.After != "" && (!q.Reverse && k <= q.After || q.Reverse && k >= q.After)) {
				continue
			}
			if q.Limit > 0 && len(want) == q.Limit {
				break
			}
			want = append(want, k)
		}
		var got []string
		err := s.List(ctx, "c", q, func(k string, decode func(any) error) error {
			var v string
			if err := decode(&v); err != nil || v != k {
				t.Fatalf("value of %q is %q (%v)", k, v, err)
			}
			got = append(got, k)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("List(%+v) = %q, want %q", q, got, want)
		}
		n, err := s.Count(ctx, "c", q.Prefix)
		wantN := 0
		for _, k := range keys {
			if strings.HasPrefix(k, q.Prefix) {
				wantN++
			}
		}
		if err != nil || n != wantN {
			t.Fatalf("Count(%q) = %d, %v; want %d", q.Prefix, n, err, wantN)
		}
	}
}

// A part keeps its keys in a slice while they arrive in order and moves to a
// tree once it is large and takes one out of order; either way every read
// sees the keys in order, and a rolled-back transaction leaves none behind.
func TestLargePartStaysOrdered(t *testing.T) {
	ctx := context.Background()
	for _, shuffled := range []bool{false, true} {
		s := memory.New()
		r := rand.New(rand.NewPCG(3, 4))
		var keys []string
		for i := range 2000 {
			keys = append(keys, "p/"+strconv.Itoa(100000+i))
		}
		if shuffled {
			r.Shuffle(len(keys)-600, func(i, j int) { keys[600+i], keys[600+j] = keys[600+j], keys[600+i] })
		}
		for i, k := range keys {
			if err := s.Update(ctx, uint64(i+1), func(tx projections.Tx) error { return tx.Put("c", k, k) }); err != nil {
				t.Fatal(err)
			}
		}
		gone := map[string]bool{}
		err := s.Update(ctx, 5000, func(tx projections.Tx) error {
			for i := 0; i < 300; i++ {
				k := keys[r.IntN(len(keys))]
				gone[k] = true
				if err := tx.Delete("c", k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		failing := s.Update(ctx, 5001, func(tx projections.Tx) error {
			for i := range 50 {
				if err := tx.Put("c", "p/0"+strconv.Itoa(i), "x"); err != nil {
					return err
				}
			}
			return context.Canceled
		})
		if failing == nil {
			t.Fatal("a failing transaction reported success")
		}
		var want []string
		for _, k := range keys {
			if !gone[k] {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		got, err := projections.ListInto[string](ctx, s, "c", projections.Query{Prefix: "p/"})
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("shuffled %v: List = %d keys (%v), want %d", shuffled, len(got), err, len(want))
		}
		rev, err := projections.ListInto[string](ctx, s, "c", projections.Query{Prefix: "p/", Reverse: true, After: want[100], Limit: 10})
		wantRev := slices.Clone(want[90:100])
		slices.Reverse(wantRev)
		if err != nil || !slices.Equal(rev, wantRev) {
			t.Fatalf("shuffled %v: reverse page = %q, want %q", shuffled, rev, wantRev)
		}
		for _, k := range keys[:200] {
			v, err := projections.GetInto[string](ctx, s, "c", k)
			if gone[k] != (err != nil) || !gone[k] && v != k {
				t.Fatalf("shuffled %v: Get(%q) = %q, %v", shuffled, k, v, err)
			}
		}
		if err := s.Update(ctx, 5002, func(tx projections.Tx) error { return tx.Put("c", want[7], "rewritten") }); err != nil {
			t.Fatal(err)
		}
		if v, err := projections.GetInto[string](ctx, s, "c", want[7]); err != nil || v != "rewritten" {
			t.Fatalf("shuffled %v: a rewritten key reads %q, %v", shuffled, v, err)
		}
		if n, err := s.Count(ctx, "c", "p/"); err != nil || n != len(want) {
			t.Fatalf("shuffled %v: Count = %d, %v; want %d", shuffled, n, err, len(want))
		}
	}
}

// The store keeps strings, orders and fills packed and other values as they
// are (their index in a part's objs reused on a rewrite, copied to a new objs
// once half of it is gone), and rolls a failed transaction back through its
// undo steps. Checked against a plain map through random transactions of
// every kind of write: every key reads back what the map holds, every list
// is the map's in order, and an order read early stays as it was read.
func TestPackedStoreMatchesAMap(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	r := rand.New(rand.NewPCG(5, 6))
	model := map[string]any{}
	keyOf := func() string {
		switch r.IntN(4) {
		case 0: // a small part, keys in any order
			return "a/" + strconv.Itoa(r.IntN(40))
		case 1: // a large part, mostly appended: it stays a slice
			return "b/" + strconv.Itoa(100000+r.IntN(1500))
		case 2: // a large part in random order: it moves to a map
			return "c/" + strconv.Itoa(r.IntN(1200))
		default: // keys without a part
			return strconv.Itoa(r.IntN(600))
		}
	}
	valueOf := func(i int) any {
		n := strconv.Itoa(i)
		switch r.IntN(5) {
		case 0:
			return "s" + strings.Repeat("x", r.IntN(200)) + n // a string, packed
		case 1:
			return ""
		case 2:
			return projections.Order{BrokerOrderID: "o" + n, State: "working", Seq: uint64(i), // an order value, packed
				Quantity: events.MustDecimal(n + ".5"), FilledQuantity: events.Int(0)}
		case 3:
			o := projections.Fill{FillID: "f" + n, Price: events.MustDecimal("-" + n + "e-3"), Quantity: events.Int(1),
				RealizedPnl: events.Int(0), Commission: events.Int(0)}
			return &o // a pointer to a fill, packed
		default:
			return &projections.Position{Instrument: "i" + n, Quantity: events.Int(int64(i))} // kept as it is
		}
	}
	var kept projections.Order
	keptKey := ""
	for txn := 1; txn <= 400; txn++ {
		staged := map[string]any{}
		deleted := map[string]bool{}
		fail := r.IntN(4) == 0
		err := s.Update(ctx, uint64(txn), func(tx projections.Tx) error {
			for i := range 1 + r.IntN(60) {
				k := keyOf()
				if r.IntN(5) == 0 {
					if err := tx.Delete("c", k); err != nil {
						return err
					}
					delete(staged, k)
					deleted[k] = true
					continue
				}
				v := valueOf(txn*1000 + i)
				if err := tx.Put("c", k, v); err != nil {
					return err
				}
				staged[k], deleted[k] = v, false
			}
			if fail {
				return context.Canceled
			}
			return nil
		})
		if fail != (err != nil) {
			t.Fatalf("transaction %d: err %v, failing %v", txn, err, fail)
		}
		if !fail {
			for k, gone := range deleted {
				if gone {
					delete(model, k)
				}
			}
			for k, v := range staged {
				model[k] = v
			}
		}
		if keptKey == "" {
			for k, v := range model {
				if _, ok := v.(projections.Order); ok {
					if o, err := projections.GetInto[projections.Order](ctx, s, "c", k); err == nil {
						kept, keptKey = o, k
					}
					break
				}
			}
		}
		if txn%50 != 0 && txn != 1 {
			continue
		}
		var want []string
		for k, v := range model {
			want = append(want, k)
			if err := sameDoc(ctx, s, k, v); err != nil {
				t.Fatalf("transaction %d: %v", txn, err)
			}
		}
		slices.Sort(want)
		var got []string
		err = s.List(ctx, "c", projections.Query{}, func(k string, decode func(any) error) error {
			got = append(got, k)
			return nil
		})
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("transaction %d: List has %d keys, the map %d (%v)", txn, len(got), len(want), err)
		}
	}
	if keptKey == "" || kept.BrokerOrderID == "" || !strings.HasPrefix(kept.BrokerOrderID, "o") || kept.State != "working" {
		t.Fatalf("an order read early changed under the store's later writes: %+v", kept)
	}
}

// sameDoc reports how the document of key differs from v, if it does.
func sameDoc(ctx context.Context, s projections.Store, key string, v any) error {
	var err error
	var same bool
	switch w := v.(type) {
	case string:
		var got string
		_, err = s.Get(ctx, "c", key, &got)
		same = got == w
	case projections.Order:
		var got projections.Order
		_, err = s.Get(ctx, "c", key, &got)
		same = got.BrokerOrderID == w.BrokerOrderID && got.Seq == w.Seq && got.Quantity.String() == w.Quantity.String()
	case *projections.Fill:
		var got projections.Fill
		_, err = s.Get(ctx, "c", key, &got)
		same = got.FillID == w.FillID && got.Price.String() == w.Price.String()
	case *projections.Position:
		var got projections.Position
		_, err = s.Get(ctx, "c", key, &got)
		same = got.Instrument == w.Instrument && got.Quantity.String() == w.Quantity.String()
	}
	if err != nil || !same {
		return fmt.Errorf("%q does not read back %+v (%v)", key, v, err)
	}
	return nil
}
