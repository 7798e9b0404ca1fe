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

// coll is one collection: values by key, and the keys in order for List.
// A Put over an existing key touches only the map, so folds that rewrite a
// document (an account, an order) never walk the ordered index.
type coll struct {
	vals map[string]any
	keys *btree.BTreeG[string]
}

func less(a, b string) bool { return a < b }

// Store is an in-memory projections.Store.
type Store struct {
	mu    sync.RWMutex
	colls map[string]*coll
	seq   uint64
	undo  []undo // the open transaction's undo steps, reused
}

// undo restores one key of c: old when had, else absent.
type undo struct {
	c   *coll
	key string
	old any
	had bool
}

// New makes an empty store.
func New() *Store { return &Store{colls: map[string]*coll{}} }

func (s *Store) coll(name string) *coll {
	c, ok := s.colls[name]
	if !ok {
		c = &coll{vals: map[string]any{}, keys: btree.NewG(32, less)}
		s.colls[name] = c
	}
	return c
}

// set makes key hold v (present) or nothing, keeping the index in step.
func (c *coll) set(key string, v any, present bool) {
	_, had := c.vals[key]
	switch {
	case present:
		c.vals[key] = v
		if !had {
			c.keys.ReplaceOrInsert(key)
		}
	case had:
		delete(c.vals, key)
		c.keys.Delete(key)
	}
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

type tx struct{ s *Store }

func (t tx) Get(coll, key string, v any) (bool, error) {
	val, ok := t.s.coll(coll).vals[key]
	if !ok {
		return false, nil
	}
	return true, assign(v, val)
}

func (t tx) Put(coll, key string, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer {
		v = rv.Elem().Interface()
	}
	c := t.s.coll(coll)
	old, had := c.vals[key]
	t.s.undo = append(t.s.undo, undo{c: c, key: key, old: old, had: had})
	c.set(key, v, true)
	return nil
}

func (t tx) Delete(coll, key string) error {
	c := t.s.coll(coll)
	if old, had := c.vals[key]; had {
		t.s.undo = append(t.s.undo, undo{c: c, key: key, old: old, had: true})
		c.set(key, nil, false)
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
	s.undo = s.undo[:0]
	if err := fn(tx{s}); err != nil {
		for i := len(s.undo) - 1; i >= 0; i-- {
			u := s.undo[i]
			u.c.set(u.key, u.old, u.had)
		}
		clear(s.undo)
		return err
	}
	clear(s.undo) // drop the references to old values
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
	c, ok := s.colls[coll]
	if !ok {
		return false, nil
	}
	val, ok := c.vals[key]
	if !ok {
		return false, nil
	}
	return true, assign(v, val)
}

// List implements projections.Store.
func (s *Store) List(_ context.Context, coll string, q projections.Query, fn func(string, func(any) error) error) error {
	s.mu.RLock()
	c, ok := s.colls[coll]
	if !ok {
		s.mu.RUnlock()
		return nil
	}
	type item struct {
		key string
		val any
	}
	var items []item
	visit := func(k string) bool {
		if !strings.HasPrefix(k, q.Prefix) {
			return false
		}
		if q.After != "" && k == q.After {
			return true
		}
		items = append(items, item{k, c.vals[k]})
		return q.Limit == 0 || len(items) < q.Limit
	}
	switch {
	case !q.Reverse && q.After != "" && q.After >= q.Prefix:
		c.keys.AscendGreaterOrEqual(q.After, visit)
	case !q.Reverse:
		c.keys.AscendGreaterOrEqual(q.Prefix, visit)
	case q.After != "" && q.After < q.Prefix+"\U0010FFFF":
		c.keys.DescendLessOrEqual(q.After, visit)
	default:
		c.keys.DescendLessOrEqual(q.Prefix+"\U0010FFFF", visit)
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
	c, ok := s.colls[coll]
	if !ok {
		return 0, nil
	}
	n := 0
	c.keys.AscendGreaterOrEqual(prefix, func(k string) bool {
		if !strings.HasPrefix(k, prefix) {
			return false
		}
		n++
		return true
	})
	return n, nil
}

// Close implements projections.Store.
func (s *Store) Close() {}
