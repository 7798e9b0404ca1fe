package memory

import (
	"slices"
	"strings"

	"github.com/google/btree"
)

// entry is one document of a part.
type entry struct {
	key string
	val any
}

// part holds one part's documents in key order. Keys mostly arrive in order
// (a sequence or a time-ordered id follows the account id), so they live in
// a sorted slice, where such an insert is an append and a read a binary
// search, with no hash table to grow. A part past sliceMax documents that
// takes a key out of order (account ids in the order accounts were opened,
// digests) moves to a hash map for reads and writes of a key, beside a B-tree
// of its keys for ordered scans: a fold reads and rewrites such documents
// (an account's, every commit) far more often than it adds one.
type part struct {
	sorted []entry
	vals   map[string]any        // non-nil once the part left the slice
	keys   *btree.BTreeG[string] // the keys of vals, in order
}

const sliceMax = 512

func cmpKey(e entry, key string) int { return strings.Compare(e.key, key) }

// find is where key is or would go in p.sorted.
func (p *part) find(key string) (int, bool) {
	if n := len(p.sorted); n > 0 {
		if c := strings.Compare(p.sorted[n-1].key, key); c <= 0 { // the newest key, or past it
			return n - 1 + b2i(c < 0), c == 0
		}
	}
	return slices.BinarySearchFunc(p.sorted, key, cmpKey)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (p *part) get(key string) (any, bool) {
	if p.vals != nil {
		v, ok := p.vals[key]
		return v, ok
	}
	if i, ok := p.find(key); ok {
		return p.sorted[i].val, true
	}
	return nil, false
}

// set makes key hold v (present) or nothing, and returns what it held.
func (p *part) set(key string, v any, present bool) (old any, had bool) {
	if p.vals != nil {
		old, had = p.vals[key]
		switch {
		case present:
			p.vals[key] = v
			if !had {
				p.keys.ReplaceOrInsert(key)
			}
		case had:
			delete(p.vals, key)
			p.keys.Delete(key)
		}
		return old, had
	}
	i, found := p.find(key)
	if found {
		old = p.sorted[i].val
	}
	switch {
	case found && present:
		p.sorted[i].val = v
	case found:
		p.sorted = slices.Delete(p.sorted, i, i+1)
	case !present:
	case i == len(p.sorted):
		p.sorted = append(p.sorted, entry{key, v})
	case len(p.sorted) >= sliceMax:
		p.vals = make(map[string]any, 2*len(p.sorted))
		p.keys = btree.NewOrderedG[string](16)
		for _, e := range p.sorted {
			p.vals[e.key] = e.val
			p.keys.ReplaceOrInsert(e.key)
		}
		p.sorted = nil
		p.vals[key] = v
		p.keys.ReplaceOrInsert(key)
	default:
		p.sorted = slices.Insert(p.sorted, i, entry{key, v})
	}
	return old, found
}

// ascend calls fn for each entry at or after from, in order, until fn says stop.
func (p *part) ascend(from string, fn func(entry) bool) {
	if p.vals != nil {
		p.keys.AscendGreaterOrEqual(from, func(k string) bool { return fn(entry{k, p.vals[k]}) })
		return
	}
	i, _ := slices.BinarySearchFunc(p.sorted, from, cmpKey)
	for _, e := range p.sorted[i:] {
		if !fn(e) {
			return
		}
	}
}

// descend calls fn for each entry at or before from, in reverse order, until fn says stop.
func (p *part) descend(from string, fn func(entry) bool) {
	if p.vals != nil {
		p.keys.DescendLessOrEqual(from, func(k string) bool { return fn(entry{k, p.vals[k]}) })
		return
	}
	i, found := slices.BinarySearchFunc(p.sorted, from, cmpKey)
	if found {
		i++
	}
	for j := i - 1; j >= 0; j-- {
		if !fn(p.sorted[j]) {
			return
		}
	}
}
