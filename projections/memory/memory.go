// Package memory is the in-memory projections.Store: the default, rebuilt by
// replay at every start. Values are kept as the Go values that were Put and
// handed out as copies, so readers never share mutable state with the fold.
package memory

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/svc/engine/projections"
)

// A collection is split into parts by its keys' first segment (up to and
// including the first "/", or "" for keys without one): keys are mostly
// "<accountId>/...", so each account's documents sit in a part of their own,
// and a fold touching one account stays in a few hot cache lines instead of
// walking indexes of every account's documents.
type coll struct {
	idx   int // the collection's place in every group's parts
	parts map[string]*part
}

// group is the parts of every collection under one first segment: a fold
// writes one account's documents, in several collections, one after another,
// and finds them all through the group it found once.
type group struct{ parts []*part }

// Store is an in-memory projections.Store.
type Store struct {
	mu     sync.RWMutex
	colls  map[string]*coll
	named  []named // collections the writer found, by their names' bytes
	groups map[string]*group
	root   group  // the parts of keys without a "/"
	last   *group // the group the writer used last, and its segment
	lastPK string
	seq    uint64
	logID  string // the log the store is bound to ("": none)
	undo   []undo // the open transaction's undo steps, reused
}

// named is a collection and the bytes of a name it was looked up by. Folds
// name collections with a few string constants, so comparing where a name's
// bytes are is enough to find most without hashing it; the pointer keeps
// those bytes alive, and string bytes never change.
type named struct {
	data *byte
	size int
	c    *coll
}

const maxNamed = 32

// undo restores one key of p: old when had, else absent.
type undo struct {
	p   *part
	key string
	old any
	had bool
}

// New makes an empty store.
func New() *Store { return &Store{colls: map[string]*coll{}, groups: map[string]*group{}} }

// partOf is the part a key (or a prefix holding a "/") belongs to.
func partOf(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i+1]
	}
	return ""
}

// part is the part of coll holding key, made when missing if make is set
// (else nil); the write lock is held.
func (s *Store) part(name, key string, make bool) *part {
	c := s.coll(name, make)
	if c == nil {
		return nil
	}
	pk := partOf(key)
	g := &s.root
	switch {
	case pk == "":
	case s.last != nil && s.lastPK == pk:
		g = s.last
	default:
		if g = s.groups[pk]; g == nil {
			if !make {
				return nil
			}
			g = &group{}
			s.groups[pk] = g
		}
		s.last, s.lastPK = g, pk
	}
	if c.idx < len(g.parts) && g.parts[c.idx] != nil {
		return g.parts[c.idx]
	}
	if !make {
		return nil
	}
	p := &part{}
	c.parts[pk] = p
	if c.idx >= len(g.parts) {
		g.parts = slices.Grow(g.parts, c.idx+1-len(g.parts))[:c.idx+1]
	}
	g.parts[c.idx] = p
	return p
}

// coll is the collection called name, made when missing if make is set
// (else nil); the write lock is held.
func (s *Store) coll(name string, make bool) *coll {
	data := unsafe.StringData(name)
	for _, n := range s.named {
		if n.data == data && n.size == len(name) {
			return n.c
		}
	}
	c, ok := s.colls[name]
	if !ok {
		if !make {
			return nil
		}
		c = &coll{idx: len(s.colls), parts: map[string]*part{}}
		s.colls[name] = c
	}
	if len(s.named) < maxNamed {
		s.named = append(s.named, named{data, len(name), c})
	}
	return c
}

// lookup is the value of key in coll, without making or caching anything:
// readers call it under the read lock.
func (s *Store) lookup(name, key string) (any, bool) {
	c, ok := s.colls[name]
	if !ok {
		return nil, false
	}
	p, ok := c.parts[partOf(key)]
	if !ok {
		return nil, false
	}
	return p.get(key)
}

// assign copies a stored document, a value or a pointer to one (see Put),
// into dst, a pointer to its type.
func assign(dst, src any) error {
	dv := reflect.ValueOf(dst)
	if dv.Kind() != reflect.Pointer || dv.IsNil() {
		return fmt.Errorf("memory: decode into %T: not a pointer", dst)
	}
	sv := reflect.ValueOf(src)
	if sv.Kind() == reflect.Pointer && sv.Type() == dv.Type() {
		sv = sv.Elem()
	}
	if !sv.Type().AssignableTo(dv.Elem().Type()) {
		return fmt.Errorf("memory: decode %T into %T", src, dst)
	}
	dv.Elem().Set(sv)
	return nil
}

type tx struct{ s *Store }

func (t tx) Get(coll, key string, v any) (bool, error) {
	p := t.s.part(coll, key, false)
	if p == nil {
		return false, nil
	}
	val, ok := p.get(key)
	if !ok {
		return false, nil
	}
	return true, assign(v, val)
}

// Put keeps a pointer as it is, without copying what it points to: the
// caller hands the document over (projections.Tx says so), and a fold that
// read a document into memory of its own saves the copy.
// From implements projections.Tx.
func (t tx) From() uint64 { return t.s.seq }

func (t tx) Put(coll, key string, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return fmt.Errorf("memory: put %s %s: a nil %T", coll, key, v)
	}
	p := t.s.part(coll, key, true)
	old, had := p.set(key, v, true)
	t.s.undo = append(t.s.undo, undo{p: p, key: key, old: old, had: had})
	return nil
}

func (t tx) Delete(coll, key string) error {
	p := t.s.part(coll, key, false)
	if p == nil {
		return nil
	}
	if old, had := p.set(key, nil, false); had {
		t.s.undo = append(t.s.undo, undo{p: p, key: key, old: old, had: true})
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
			u.p.set(u.key, u.old, u.had)
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

// LogID implements projections.Store.
func (s *Store) LogID(context.Context) (string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.logID, nil
}

// Bind implements projections.Store.
func (s *Store) Bind(_ context.Context, logID string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logID == "" {
		s.logID = logID
	}
	return s.logID, nil
}

// Get implements projections.Store.
func (s *Store) Get(_ context.Context, coll, key string, v any) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	val, ok := s.lookup(coll, key)
	if !ok {
		return false, nil
	}
	return true, assign(v, val)
}

// item is one document as List hands it out.
type item entry

// List implements projections.Store.
func (s *Store) List(_ context.Context, coll string, q projections.Query, fn func(string, func(any) error) error) error {
	s.mu.RLock()
	items := s.selectItems(coll, q)
	s.mu.RUnlock()
	for _, it := range items {
		val := it.val
		if err := fn(it.key, func(v any) error { return assign(v, val) }); err != nil {
			return err
		}
	}
	return nil
}

// selectItems runs q on coll; s.mu is held. A prefix holding a "/" lies in one
// part and is read from its index in order; a shorter one gathers from every
// part it may reach and sorts.
func (s *Store) selectItems(coll string, q projections.Query) []item {
	c, ok := s.colls[coll]
	if !ok {
		return nil
	}
	if strings.IndexByte(q.Prefix, '/') >= 0 {
		p, ok := c.parts[partOf(q.Prefix)]
		if !ok {
			return nil
		}
		return p.scan(q)
	}
	var all []item
	for name, p := range c.parts {
		if name == "" || strings.HasPrefix(name, q.Prefix) {
			all = append(all, p.scan(projections.Query{Prefix: q.Prefix})...)
		}
	}
	slices.SortFunc(all, func(a, b item) int { return strings.Compare(a.key, b.key) })
	if q.Reverse {
		slices.Reverse(all)
	}
	out := all[:0]
	for _, it := range all {
		if q.After != "" && (!q.Reverse && it.key <= q.After || q.Reverse && it.key >= q.After) {
			continue
		}
		out = append(out, it)
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
	}
	return out
}

// scan runs q on one part.
func (p *part) scan(q projections.Query) []item {
	var items []item
	visit := func(e entry) bool {
		if !strings.HasPrefix(e.key, q.Prefix) {
			return false
		}
		if q.After != "" && e.key == q.After {
			return true
		}
		items = append(items, item(e))
		return q.Limit == 0 || len(items) < q.Limit
	}
	switch {
	case !q.Reverse && q.After != "" && q.After >= q.Prefix:
		p.ascend(q.After, visit)
	case !q.Reverse:
		p.ascend(q.Prefix, visit)
	case q.After != "" && q.After < q.Prefix+"\U0010FFFF":
		p.descend(q.After, visit)
	default:
		p.descend(q.Prefix+"\U0010FFFF", visit)
	}
	return items
}

// Count implements projections.Store.
func (s *Store) Count(_ context.Context, coll, prefix string) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if strings.IndexByte(prefix, '/') >= 0 {
		c, ok := s.colls[coll]
		if !ok {
			return 0, nil
		}
		p, ok := c.parts[partOf(prefix)]
		if !ok {
			return 0, nil
		}
		return p.count(prefix), nil
	}
	n := 0
	c, ok := s.colls[coll]
	if !ok {
		return 0, nil
	}
	for name, p := range c.parts {
		if name == "" || strings.HasPrefix(name, prefix) {
			n += p.count(prefix)
		}
	}
	return n, nil
}

func (p *part) count(prefix string) int {
	n := 0
	p.ascend(prefix, func(e entry) bool {
		if !strings.HasPrefix(e.key, prefix) {
			return false
		}
		n++
		return true
	})
	return n
}

// Close implements projections.Store.
func (s *Store) Close() {}
