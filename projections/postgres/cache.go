package postgres

import "sync"

// cacheGen bounds one generation of the document cache.
const cacheGen = 16384

// cache holds documents as of the checkpoint this store last committed (seq),
// so a fold rereading a hot document (an account, a day's PnL, a resting
// order) skips the round trip, and so does a read while this store is the
// projection's only writer (Store.SetSoleWriter). It is trusted only while
// the checkpoint in the database is still seq: another writer of the
// projection moves it, and the cache is dropped. Two generations approximate
// LRU: a full current generation becomes the old one, and a hit in the old
// one moves forward. Entries never change once made, so a reader may use one
// after the lock is released.
type cache struct {
	mu       sync.Mutex
	seq      uint64 // checkpoint the entries are valid at; 0: empty
	cur, old map[docKey]*entry
}

func (c *cache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq, c.cur, c.old = 0, map[docKey]*entry{}, nil
}

// at is the checkpoint the entries are valid at (0: none).
func (c *cache) at() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

func (c *cache) get(k docKey) (*entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(k)
}

// lookup is get for a reader: only entries valid at a checkpoint, and the
// checkpoint they are valid at.
func (c *cache) lookup(k docKey) (*entry, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seq == 0 {
		return nil, 0, false
	}
	e, ok := c.getLocked(k)
	return e, c.seq, ok
}

func (c *cache) getLocked(k docKey) (*entry, bool) {
	if e, ok := c.cur[k]; ok {
		return e, true
	}
	if e, ok := c.old[k]; ok {
		c.putLocked(k, e)
		return e, true
	}
	return nil, false
}

// fill adds a document a reader read from the database while the cache was
// valid at seq, if it still is (the reader held Store.visible, so no commit
// landed meanwhile; a reset may have).
func (c *cache) fill(seq uint64, k docKey, e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq == 0 || c.seq != seq {
		return
	}
	if _, ok := c.cur[k]; !ok {
		c.putLocked(k, e)
	}
}

func (c *cache) putLocked(k docKey, e *entry) {
	c.cur[k] = e
	if len(c.cur) >= cacheGen {
		c.old, c.cur = c.cur, make(map[docKey]*entry, cacheGen)
	}
}

// commit records a committed transaction's documents at checkpoint seq.
func (c *cache) commit(seq uint64, buf map[docKey]*entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range buf {
		switch {
		case e.state == stateDeleted:
			e = &entry{state: stateAbsent}
		case e.fresh: // in the database now: a later transaction's Put of it is an upsert
			f := *e
			f.fresh = false
			e = &f
		}
		c.putLocked(k, e)
	}
	c.seq = seq
}
