// Package memory is the in-memory projections.Store: the default, rebuilt by
// replay at every start. Values are kept as the Go values that were Put and
// handed out as copies, so readers never share mutable state with the fold.
package memory

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/google/btree"

	"github.com/svc/engine/projections"
)

type item struct {
	key string
	val any
}

func less(a, b item) bool { return a.key < b.key }

// Store is an in-memory projections.Store.
type Store struct {
	mu    sync.RWMutex
	colls map[string]*btree.BTreeG[item]
	seq   uint64
}

// New makes an empty store.
func New() *Store { return &Store{colls: map[string]*btree.BTreeG[item]{}} }

func (s *Store) coll(name string) *btree.BTreeG[item] {
	t, ok := s.colls[name]
	if !ok {
		t = btree.NewG(32, less)
		s.colls[name] = t
	}
	return t
}

func assign(dst, src any) error {
	dv := reflect.ValueOf(dst)
	if dv.Kind() != reflect.Pointer || dv.IsNil() {
		return fmt.Errorf("memory: decode into %T: not a pointer", dst)
	}
	sv := reflect.ValueOf(src)
	if !sv.Type().AssignableTo(dv.Elem().Type()) {
		return fmt.Errorf("memory: decode %T into %T", src, dst)
	}
	dv.Elem().Set(sv)
	return nil
}

type tx struct {
	s   *Store
	log []func() // undo steps, newest last
}

func (t *tx) Get(coll, key string, v any) (bool, error) {
	it, ok := t.s.coll(coll).Get(item{key: key})
	if !ok {
		return false, nil
	}
	return true, assign(v, it.val)
}

func (t *tx) Put(coll, key string, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		v = rv.Elem().Interface()
	}
	tr := t.s.coll(coll)
	old, had := tr.ReplaceOrInsert(item{key: key, val: v})
	t.log = append(t.log, func() {
		if had {
			tr.ReplaceOrInsert(old)
		} else {
			tr.Delete(item{key: key})
		}
	})
	return nil
}

func (t *tx) Delete(coll, key string) error {
	tr := t.s.coll(coll)
	old, had := tr.Delete(item{key: key})
	if had {
		t.log = append(t.log, func() { tr.ReplaceOrInsert(old) })
	}
	return nil
}

// Update implements projections.Store; a failing fn leaves nothing changed.
func (s *Store) Update(_ context.Context, seq uint64, fn func(projections.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.seq {
		return nil
	}
	t := &tx{s: s}
	if err := fn(t); err != nil {
		for i := len(t.log) - 1; i >= 0; i-- {
			t.log[i]()
		}
		return err
	}
	s.seq = seq
	return nil
}

// Checkpoint implements projections.Store.
func (s *Store) Checkpoint(context.Context) (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.seq, nil
}

// Get implements projections.Store.
func (s *Store) Get(_ context.Context, coll, key string, v any) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.colls[coll]
	if !ok {
		return false, nil
	}
	it, ok := t.Get(item{key: key})
	if !ok {
		return false, nil
	}
	return true, assign(v, it.val)
}

// List implements projections.Store.
func (s *Store) List(_ context.Context, coll string, q projections.Query, fn func(string, func(any) error) error) error {
	s.mu.RLock()
	t, ok := s.colls[coll]
	if !ok {
		s.mu.RUnlock()
		return nil
	}
	var items []item
	visit := func(it item) bool {
		if !strings.HasPrefix(it.key, q.Prefix) {
			return false
		}
		if q.After != "" && it.key == q.After {
			return true
		}
		items = append(items, it)
		return q.Limit == 0 || len(items) < q.Limit
	}
	switch {
	case !q.Reverse && q.After != "" && q.After >= q.Prefix:
		t.AscendGreaterOrEqual(item{key: q.After}, visit)
	case !q.Reverse:
		t.AscendGreaterOrEqual(item{key: q.Prefix}, visit)
	case q.After != "" && q.After < q.Prefix+"\U0010FFFF":
		t.DescendLessOrEqual(item{key: q.After}, visit)
	default:
		t.DescendLessOrEqual(item{key: q.Prefix + "\U0010FFFF"}, visit)
	}
	s.mu.RUnlock()
	for _, it := range items {
		val := it.val
		if err := fn(it.key, func(v any) error { return assign(v, val) }); err != nil {
			return err
		}
	}
	return nil
}

// Count implements projections.Store.
func (s *Store) Count(_ context.Context, coll, prefix string) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.colls[coll]
	if !ok {
		return 0, nil
	}
	n := 0
	t.AscendGreaterOrEqual(item{key: prefix}, func(it item) bool {
		if !strings.HasPrefix(it.key, prefix) {
			return false
		}
		n++
		return true
	})
	return n, nil
}

// Close implements projections.Store.
func (s *Store) Close() {}
