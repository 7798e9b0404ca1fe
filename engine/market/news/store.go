// Package news ingests market headlines and economic-calendar events from
// configured sources (RSS and Atom feeds, and a file source with a shipped
// sample set), tags them with futures roots, keeps them in indexes paged by
// publish time, proxies their thumbnails and notifies subscribers.
package news

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"
)

// Item is one headline.
type Item struct {
	ID          string
	Source      string
	Title       string
	Summary     string
	URL         string
	ImageURL    string // upstream http(s) URL, or "sample:<file>" for the shipped set; "" for none
	PublishedAt time.Time
	Roots       []string
}

// Cursor is a position in a newest-first listing: after the item published at
// T (Unix nanoseconds) with id ID.
type Cursor struct {
	T  int64
	ID string
}

// ErrBadCursor is returned for a cursor this service did not make.
var ErrBadCursor = errors.New("news: invalid cursor")

const cursorPrefix = "n1."

// Encode renders the cursor as an opaque token.
func (c Cursor) Encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(c.T, 36) + "." + c.ID))
}

// DecodeCursor reads a token made by Encode.
func DecodeCursor(s string) (Cursor, error) {
	if s == "" || len(s) > 200 {
		return Cursor{}, ErrBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, ErrBadCursor
	}
	rest, ok := strings.CutPrefix(string(b), cursorPrefix)
	if !ok {
		return Cursor{}, ErrBadCursor
	}
	ts, id, ok := strings.Cut(rest, ".")
	t, err := strconv.ParseInt(ts, 36, 64)
	if !ok || err != nil || !validID(id) {
		return Cursor{}, ErrBadCursor
	}
	return Cursor{T: t, ID: id}, nil
}

func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

type entry struct {
	t    int64
	id   string
	item *Item
}

// newest first; ties by id descending
func less(a, b entry) bool {
	if a.t != b.t {
		return a.t > b.t
	}
	return a.id > b.id
}

// Store indexes headlines newest first, overall and per root. Safe for
// concurrent use; a page costs O(log n + limit).
type Store struct {
	mu     sync.RWMutex
	byID   map[string]*Item
	all    *btree.BTreeG[entry]
	byRoot map[string]*btree.BTreeG[entry]
}

// NewStore makes an empty store.
func NewStore() *Store {
	return &Store{byID: map[string]*Item{}, all: btree.NewG(32, less), byRoot: map[string]*btree.BTreeG[entry]{}}
}

// Add stores it; false when an item with its id is already stored.
func (s *Store) Add(it Item) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[it.ID]; ok {
		return false
	}
	p := &it
	s.byID[it.ID] = p
	e := entry{t: it.PublishedAt.UnixNano(), id: it.ID, item: p}
	s.all.ReplaceOrInsert(e)
	for _, r := range it.Roots {
		t := s.byRoot[r]
		if t == nil {
			t = btree.NewG(32, less)
			s.byRoot[r] = t
		}
		t.ReplaceOrInsert(e)
	}
	return true
}

// Get finds an item by id.
func (s *Store) Get(id string) (Item, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.byID[id]
	if !ok {
		return Item{}, false
	}
	return *p, true
}

// Len counts stored items.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byID)
}

// Page lists up to limit items newest first (of root, when not empty), after
// the cursor when given; next is the cursor of the following page, nil at the end.
func (s *Store) Page(root string, after *Cursor, limit int) (items []Item, next *Cursor) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.all
	if root != "" {
		if t = s.byRoot[root]; t == nil {
			return nil, nil
		}
	}
	items = make([]Item, 0, limit)
	visit := func(e entry) bool {
		if after != nil && e.t == after.T && e.id == after.ID {
			return true
		}
		if len(items) == limit {
			next = &Cursor{T: items[len(items)-1].PublishedAt.UnixNano(), ID: items[len(items)-1].ID}
			return false
		}
		items = append(items, *e.item)
		return true
	}
	if after == nil {
		t.Ascend(visit)
	} else {
		t.AscendGreaterOrEqual(entry{t: after.T, id: after.ID}, visit)
	}
	return items, next
}
