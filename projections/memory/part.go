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
// takes a key out of order moves to a B-tree, so random keys (digests, say)
// never cost a long copy each.
type part struct {
	sorted []entry
	tree   *btree.BTreeG[entry] // non-nil once the part left the slice
}

const sliceMax = 512

func lessEntry(a, b entry) bool { return a.key < b.key }

func cmpKey(e entry, key string) int { return strings.Compare(e.key, key) }

// find is where key is or would go in p.sorted.
func (p *part) find(key string) (int, bool) {
	if n := len(p.sorted); n > 0 && p.sorted[n-1].key <= key { // the newest key, or past it
		return n - 1 + b2i(p.sorted[n-1].key != key), p.sorted[n-1].key == key
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
	if p.tree != nil {
		e, ok := p.tree.Get(entry{key: key})
		return e.val, ok
	}
	if i, ok := p.find(key); ok {
		return p.sorted[i].val, true
	}
	return nil, false
}

// set makes key hold v (present) or nothing, and returns what it held.
func (p *part) set(key string, v any, present bool) (old any, had bool) {
	if p.tree != nil {
		var e entry
		if present {
			e, had = p.tree.ReplaceOrInsert(entry{key, v})
		} else {
			e, had = p.tree.Delete(entry{key: key})
		}
		return e.val, had
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
		p.tree = btree.NewG(16, lessEntry)
		for _, e := range p.sorted {
			p.tree.ReplaceOrInsert(e)
		}
		p.sorted = nil
		p.tree.ReplaceOrInsert(entry{key, v})
	default:
		p.sorted = slices.Insert(p.sorted, i, entry{key, v})
	}
	return old, found
}

// ascend calls fn for each entry at or after from, in order, until fn says stop.
func (p *part) ascend(from string, fn func(entry) bool) {
	if p.tree != nil {
		p.tree.AscendGreaterOrEqual(entry{key: from}, fn)
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
	if p.tree != nil {
		p.tree.DescendLessOrEqual(entry{key: from}, fn)
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
