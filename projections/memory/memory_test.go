package memory_test

import (
	"context"
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
