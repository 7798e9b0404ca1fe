// Package memory is the in-memory projections.Store: the default, rebuilt by
// replay at every start. Strings and projections.Packable documents (orders,
// fills) are kept packed, with nothing inside for the collector to trace;
// other values as the Go values that were Put. Either is handed out as a
// copy (an unpacked document's strings share the packed string, which never
// changes), so readers never share mutable state with the fold.
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
	logID  string         // the log the store is bound to ("": none)
	undo   []undo         // the open transaction's undo steps, reused
	types  []reflect.Type // the types of packed documents, by slot.kind-kindPacked
	buf    []byte         // where the writer packs a document
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

// undo restores one key of p: old (and its Go value oldVal) when had, else absent.
type undo struct {
	p      *part
	key    string
	old    slot
	oldVal any
	had    bool
}

// doc is a stored document as read: the Go value put (see Put), or a
// packed one, whose raw bytes share its slot's string and whose val is a
// nil pointer of the type it unpacks into (projections.Packable) or, for a
// string document, stringDoc.
type doc struct {
	val any
	raw string // a packed document's bytes, or a string document itself
}

// stringDoc is the val of a string document.
var stringDoc any = (*string)(nil)

// typeIndex is the index of the packed type t in s.types, added when new;
// the write lock is held.
func (s *Store) typeIndex(t reflect.Type) uint32 {
	i := slices.Index(s.types, t)
	if i < 0 {
		i = len(s.types)
		s.types = append(s.types, t)
	}
	return uint32(i)
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

// lookup is the document of key in coll, without making or caching
// anything: readers call it under the read lock.
func (s *Store) lookup(name, key string) (doc, bool) {
	c, ok := s.colls[name]
	if !ok {
		return doc{}, false
	}
	p, ok := c.parts[partOf(key)]
	if !ok {
		return doc{}, false
	}
	sl, ok := p.get(key)
	if !ok {
		return doc{}, false
	}
	return p.doc(sl, s.types), true
}

// assign copies a stored document into dst, a pointer to its type: a
// packed one unpacked, a value or a pointer to one (see Put) copied.
func assign(dst any, d doc) error {
	switch {
	case d.val == stringDoc:
		p, ok := dst.(*string)
		if !ok {
			return fmt.Errorf("memory: decode a string into %T", dst)
		}
		*p = d.raw
		return nil
	case d.raw != "":
		p, ok := dst.(projections.Packable)
		if !ok || reflect.TypeOf(dst) != reflect.TypeOf(d.val) {
			return fmt.Errorf("memory: decode %T into %T", d.val, dst)
		}
		return p.UnpackFrom(d.raw)
	}
	src := d.val
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
	sl, ok := p.get(key)
	if !ok {
		return false, nil
	}
	return true, assign(v, p.doc(sl, t.s.types))
}

// From implements projections.Tx.
func (t tx) From() uint64 { return t.s.seq }

// Put packs a string or a projections.Packable into one string with its key
// (see part) and keeps any other value as it is, a pointer without copying
// what it points to: the caller hands the document over (projections.Tx
// says so), and a fold that read a document into memory of its own saves
// the copy.
func (t tx) Put(coll, key string, v any) error {
	if rv := reflect.ValueOf(v); !rv.IsValid() || rv.Kind() == reflect.Pointer && rv.IsNil() {
		return fmt.Errorf("memory: put %s %s: a nil %T", coll, key, v)
	}
	p := t.s.part(coll, key, true)
	old, oldVal, had := p.put(t.s, key, v)
	t.s.undo = append(t.s.undo, undo{p: p, key: key, old: old, oldVal: oldVal, had: had})
	return nil
}

// PacksOnPut implements projections.PacksOnPut: Put packs a Packable
// document before it returns.
func (t tx) PacksOnPut() {}

var _ projections.PacksOnPut = tx{}

func (t tx) Delete(coll, key string) error {
	p := t.s.part(coll, key, false)
	if p == nil {
		return nil
	}
	if old, oldVal, had := p.del(key); had {
		t.s.undo = append(t.s.undo, undo{p: p, key: key, old: old, oldVal: oldVal, had: true})
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
			u.p.restore(u.key, u.old, u.oldVal, u.had)
		}
		clear(s.undo)
		return err
	}
	for _, u := range s.undo {
		u.p.compact() // only between transactions: an undo names indexes in objs
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
	return s.get(coll, key, v)
}

// get is Get; s.mu is held.
func (s *Store) get(coll, key string, v any) (bool, error) {
	d, ok := s.lookup(coll, key)
	if !ok {
		return false, nil
	}
	return true, assign(v, d)
}

// item is one document as List hands it out.
type item struct {
	key string
	doc
}

// List implements projections.Store.
func (s *Store) List(_ context.Context, coll string, q projections.Query, fn func(string, func(any) error) error) error {
	s.mu.RLock()
	items := s.selectItems(coll, q)
	s.mu.RUnlock()
	return each(items, fn)
}

// each calls List's fn with each item.
func each(items []item, fn func(string, func(any) error) error) error {
	for _, it := range items {
		d := it.doc
		if err := fn(it.key, func(v any) error { return assign(v, d) }); err != nil {
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
		return p.scan(q, s.types)
	}
	var all []item
	for name, p := range c.parts {
		if name == "" || strings.HasPrefix(name, q.Prefix) {
			all = append(all, p.scan(projections.Query{Prefix: q.Prefix}, s.types)...)
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

// scan runs q on one part, whose packed documents are of types.
func (p *part) scan(q projections.Query, types []reflect.Type) []item {
	var items []item
	visit := func(key string, sl slot) bool {
		if !strings.HasPrefix(key, q.Prefix) {
			return false
		}
		if q.After != "" && key == q.After {
			return true
		}
		items = append(items, item{key, p.doc(sl, types)})
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
	return s.count(coll, prefix), nil
}

// count is Count; s.mu is held.
func (s *Store) count(coll, prefix string) int {
	if strings.IndexByte(prefix, '/') >= 0 {
		c, ok := s.colls[coll]
		if !ok {
			return 0
		}
		p, ok := c.parts[partOf(prefix)]
		if !ok {
			return 0
		}
		return p.count(prefix)
	}
	n := 0
	c, ok := s.colls[coll]
	if !ok {
		return 0
	}
	for name, p := range c.parts {
		if name == "" || strings.HasPrefix(name, prefix) {
			n += p.count(prefix)
		}
	}
	return n
}

func (p *part) count(prefix string) int {
	n := 0
	p.ascend(prefix, func(key string, _ slot) bool {
		if !strings.HasPrefix(key, prefix) {
			return false
		}
		n++
		return true
	})
	return n
}

// Close implements projections.Store.
func (s *Store) Close() {}

// View implements projections.Viewer: fn reads under the store's read lock,
// so every read sees the documents as of one commit; an Update waits until
// fn returns. fn must not read s itself meanwhile (a second read lock
// behind a waiting Update would never be granted), only the view.
func (s *Store) View(_ context.Context, fn func(projections.Store) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return fn(view{s})
}

var _ projections.Viewer = (*Store)(nil)

// view is a Store whose read lock View holds.
type view struct{ s *Store }

func (v view) Update(context.Context, uint64, func(projections.Tx) error) error {
	return projections.ErrReadOnly
}

func (v view) Checkpoint(context.Context) (uint64, error) { return v.s.seq, nil }

func (v view) Get(_ context.Context, coll, key string, dst any) (bool, error) {
	return v.s.get(coll, key, dst)
}

func (v view) List(_ context.Context, coll string, q projections.Query, fn func(string, func(any) error) error) error {
	return each(v.s.selectItems(coll, q), fn)
}

func (v view) Count(_ context.Context, coll, prefix string) (int, error) {
	return v.s.count(coll, prefix), nil
}

func (v view) LogID(context.Context) (string, error) { return v.s.logID, nil }

func (v view) Bind(context.Context, string) (string, error) { return "", projections.ErrReadOnly }

func (v view) Close() {}
