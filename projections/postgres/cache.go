package postgres

// cacheGen bounds one generation of the document cache.
const cacheGen = 16384

// cache holds documents as of the checkpoint this store last committed (seq),
// so a fold rereading a hot document (an account, a day's PnL, a resting
// order) skips the round trip. It is trusted only while the checkpoint in the
// database is still seq: another writer of the projection moves it, and the
// cache is dropped. Two generations approximate LRU: a full current
// generation becomes the old one, and a hit in the old one moves forward.
// It is owned by the Update holding Store.wmu.
type cache struct {
	seq      uint64 // checkpoint the entries are valid at; 0: empty
	cur, old map[docKey]*entry
}

func (c *cache) reset() {
	c.seq, c.cur, c.old = 0, map[docKey]*entry{}, nil
}

func (c *cache) get(k docKey) (*entry, bool) {
	if e, ok := c.cur[k]; ok {
		return e, true
	}
	if e, ok := c.old[k]; ok {
		c.put(k, e)
		return e, true
	}
	return nil, false
}

func (c *cache) put(k docKey, e *entry) {
	c.cur[k] = e
	if len(c.cur) >= cacheGen {
		c.old, c.cur = c.cur, make(map[docKey]*entry, cacheGen)
	}
}

// commit records a committed transaction's documents at checkpoint seq.
func (c *cache) commit(seq uint64, buf map[docKey]*entry) {
	for k, e := range buf {
		if e.state == stateDeleted {
			e = &entry{state: stateAbsent}
		}
		c.put(k, e)
	}
	c.seq = seq
}
