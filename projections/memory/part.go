package memory

import (
	"reflect"
	"slices"
	"strings"
	"unsafe"

	"github.com/google/btree"

	"github.com/svc/engine/projections"
)

// part holds one part's documents in key order, mostly in memory the
// collector has next to nothing to trace in: a packed document (a string or
// a projections.Packable) is one string of its key and its bytes, and its
// slot one reference to it; only documents kept as Go values are values
// with references of their own (objs). A string never changes, so what is
// handed out over it (a key, a string document, an unpacked document's
// strings, which share it) stays valid whatever the store does next; a
// replaced or deleted document is the collector's once nobody holds it.
//
// Keys mostly arrive in order (a sequence or a time-ordered id follows the
// account id), so the slots live in a sorted slice, where such an insert is
// an append and a read a binary search, with no hash table to grow. A part
// past sliceMax documents that takes a key out of order (account ids in the
// order accounts were opened, digests) moves its slots to a hash map for
// reads and writes of a key, beside a B-tree of its keys for ordered scans:
// a fold reads and rewrites such documents (an account's, every commit) far
// more often than it adds one.
type part struct {
	objs   []any  // the Go values of documents kept as they are, by slot.vlen
	dead   int    // nil elements of objs
	sorted []slot // by key, while the part is a slice
	// last is a copy of the last key of sorted, when it is at most lastMax
	// bytes (lastLen < 0: not kept): a fold appends to many parts in turn,
	// and comparing with the copy here spares a read of the last slot and
	// its string (cache misses) in each: BenchCore folds a commit in 4.0-4.2
	// us with it, 4.3-4.6 us without.
	last    [lastMax]byte
	lastLen int
	vals    map[string]slot       // non-nil once the part left the slice
	keys    *btree.BTreeG[string] // the keys of vals, in order
}

// slot is one document: its key and, packed, its bytes in one string, or
// the index of its Go value in objs.
type slot struct {
	kv   string // the key, then a packed document's bytes
	klen uint32 // the key's length
	vlen uint32 // a Go value's index in objs
	kind uint32 // kindValue, kindString, or kindPacked+i: the store's packed type i
}

const (
	kindValue = iota
	kindString
	kindPacked
)

const (
	sliceMax = 512
	lastMax  = 96
)

// key is the key of sl.
func (p *part) key(sl slot) string { return sl.kv[:sl.klen] }

// doc is the document sl names, as assign reads it.
func (p *part) doc(sl slot, types []reflect.Type) doc {
	switch {
	case sl.kind == kindValue:
		return doc{val: p.objs[sl.vlen]}
	case sl.kind == kindString:
		return doc{val: stringDoc, raw: sl.kv[sl.klen:]}
	default:
		return doc{val: reflect.Zero(types[sl.kind-kindPacked]).Interface(), raw: sl.kv[sl.klen:]}
	}
}

// find is where key is or would go in p.sorted.
func (p *part) find(key string) (int, bool) {
	if n := len(p.sorted); n > 0 {
		last := unsafe.String(&p.last[0], max(p.lastLen, 0))
		if p.lastLen < 0 {
			last = p.key(p.sorted[n-1])
		}
		if c := strings.Compare(last, key); c <= 0 { // the newest key, or past it
			return n - 1 + b2i(c < 0), c == 0
		}
	}
	return slices.BinarySearchFunc(p.sorted, key, func(sl slot, key string) int { return strings.Compare(p.key(sl), key) })
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (p *part) get(key string) (slot, bool) {
	if p.vals != nil {
		sl, ok := p.vals[key]
		return sl, ok
	}
	if i, ok := p.find(key); ok {
		return p.sorted[i], true
	}
	return slot{}, false
}

// put makes key hold v, packed when it is a string or a Packable (its type
// one of s.types), and returns what the key held before: the slot, and its
// Go value where it was one.
func (p *part) put(s *Store, key string, v any) (old slot, oldVal any, had bool) {
	i, found := -1, false
	if p.vals != nil {
		old, found = p.vals[key]
	} else if i, found = p.find(key); found {
		old = p.sorted[i]
	}
	sl := old
	if found {
		oldVal = p.release(old)
		if old.kind == kindValue {
			key = old.kv // the key it was stored under (a packed document's would hold on to its bytes)
		}
	}
	sl.klen, sl.kind = uint32(len(key)), kindString
	switch x := v.(type) {
	case string:
		sl.kv = key + x
	default:
		if pk, ok := projections.AsPackable(v); ok {
			s.buf = pk.AppendPacked(append(s.buf[:0], key...))
			sl.kv = string(s.buf)
			sl.kind = kindPacked + s.typeIndex(reflect.TypeOf(pk))
			break
		}
		sl.kv, sl.kind = key, kindValue
		if found && old.kind == kindValue {
			p.setObj(old.vlen, v) // release kept the index
		} else {
			sl.vlen = uint32(len(p.objs))
			p.objs = append(p.objs, v)
		}
	}
	p.place(key, i, found, sl)
	return old, oldVal, found
}

// release accounts for the document sl no longer being held, and returns
// its Go value where it was one. The value's index in objs stays its own
// until compact (an undo may put it back).
func (p *part) release(sl slot) any {
	if sl.kind != kindValue {
		return nil
	}
	v := p.objs[sl.vlen]
	p.setObj(sl.vlen, nil)
	return v
}

// setObj sets objs[i], counting the nil ones.
func (p *part) setObj(i uint32, v any) {
	switch {
	case p.objs[i] == nil && v != nil:
		p.dead--
	case p.objs[i] != nil && v == nil:
		p.dead++
	}
	p.objs[i] = v
}

// place stores sl for key: at i of p.sorted (found: replacing what is
// there), or in the map.
func (p *part) place(key string, i int, found bool, sl slot) {
	key = p.key(sl) // the slot's own: the map and the tree keep no other string
	switch {
	case p.vals != nil:
		p.vals[key] = sl // the map keeps the key given last
		if !found || sl.kind != kindValue {
			p.keys.ReplaceOrInsert(key) // nor does the tree keep a replaced document's string
		}
	case found:
		p.sorted[i] = sl
	case i == len(p.sorted):
		p.sorted = append(p.sorted, sl)
		p.noteLast(key)
	case len(p.sorted) >= sliceMax:
		p.vals = make(map[string]slot, 2*len(p.sorted))
		p.keys = btree.NewOrderedG[string](16)
		for _, s := range p.sorted {
			k := p.key(s)
			p.vals[k] = s
			p.keys.ReplaceOrInsert(k)
		}
		p.sorted = nil
		p.vals[key] = sl
		p.keys.ReplaceOrInsert(key)
	default:
		p.sorted = slices.Insert(p.sorted, i, sl)
	}
}

// noteLast keeps a copy of key, the last of p.sorted now.
func (p *part) noteLast(key string) {
	p.lastLen = -1
	if len(key) <= lastMax {
		p.lastLen = copy(p.last[:], key)
	}
}

// del removes key, and returns what it held as put does.
func (p *part) del(key string) (old slot, oldVal any, had bool) {
	if p.vals != nil {
		if old, had = p.vals[key]; had {
			delete(p.vals, key)
			p.keys.Delete(key)
		}
	} else {
		var i int
		if i, had = p.find(key); had {
			old = p.sorted[i]
			p.sorted = slices.Delete(p.sorted, i, i+1)
			if n := len(p.sorted); n > 0 && i == n {
				p.noteLast(p.key(p.sorted[n-1]))
			}
		}
	}
	if had {
		oldVal = p.release(old)
	}
	return old, oldVal, had
}

// restore undoes a put or a del of key: it holds old (and its Go value
// oldVal) again if had, else nothing.
func (p *part) restore(key string, old slot, oldVal any, had bool) {
	if cur, ok := p.get(key); ok {
		if cur.kind == kindValue && (!had || old.kind != kindValue || old.vlen != cur.vlen) {
			p.setObj(cur.vlen, nil)
		}
		if !had {
			p.del(key)
			return
		}
	}
	if !had {
		return
	}
	if old.kind == kindValue {
		p.setObj(old.vlen, oldVal)
	}
	i, found := -1, false
	if p.vals != nil {
		_, found = p.vals[key]
	} else {
		i, found = p.find(key)
	}
	p.place(key, i, found, old)
}

// compact copies the part's live Go values to a new objs once at least
// half of it is left behind.
func (p *part) compact() {
	if p.dead < 64 || 2*p.dead < len(p.objs) {
		return
	}
	objs := make([]any, 0, len(p.objs)-p.dead)
	move := func(sl slot) slot {
		if sl.kind == kindValue {
			objs = append(objs, p.objs[sl.vlen])
			sl.vlen = uint32(len(objs) - 1)
		}
		return sl
	}
	if p.vals == nil {
		for i, sl := range p.sorted {
			p.sorted[i] = move(sl)
		}
	} else {
		for k, sl := range p.vals {
			p.vals[k] = move(sl)
		}
	}
	p.objs, p.dead = objs, 0
}

// ascend calls fn for each document at or after from, in order, until fn
// says stop.
func (p *part) ascend(from string, fn func(key string, sl slot) bool) {
	if p.vals != nil {
		p.keys.AscendGreaterOrEqual(from, func(k string) bool { return fn(k, p.vals[k]) })
		return
	}
	i, _ := slices.BinarySearchFunc(p.sorted, from, func(sl slot, key string) int { return strings.Compare(p.key(sl), key) })
	for _, sl := range p.sorted[i:] {
		if !fn(p.key(sl), sl) {
			return
		}
	}
}

// descend calls fn for each document at or before from, in reverse order,
// until fn says stop.
func (p *part) descend(from string, fn func(key string, sl slot) bool) {
	if p.vals != nil {
		p.keys.DescendLessOrEqual(from, func(k string) bool { return fn(k, p.vals[k]) })
		return
	}
	i, found := slices.BinarySearchFunc(p.sorted, from, func(sl slot, key string) int { return strings.Compare(p.key(sl), key) })
	if found {
		i++
	}
	for j := i - 1; j >= 0; j-- {
		if !fn(p.key(p.sorted[j]), p.sorted[j]) {
			return
		}
	}
}
