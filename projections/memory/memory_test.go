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
