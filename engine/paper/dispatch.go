package paper

// waker is one account's wake on one instrument, queued or in flight.
type waker struct {
	fill     bool // may fill an order: goes first
	queued   bool
	inflight bool
	parked   bool       // with marks: a move that waits for a quote through its stop, never sent
	upgrade  *levels    // a queued move wake's fill levels, in its book's upgrade trees
	trails   []trailRef // a queued move wake's trailing stops, in its book's groups
	since    uint64     // the first quote the wake has not decided on: its best touches count from it
}

// enqueue queues w, the wake of k, as a fill or a move; a move keeps the
// levels of the account's orders (triggers ts) in the upgrade trees.
func (r *Reactor) enqueue(k key, w *waker, fill bool, ts []Trigger) {
	w.queued, w.fill = true, fill
	if fill {
		r.fills = append(r.fills, k)
		return
	}
	if r.onMark != nil {
		w.parked = true // its quotes are marks: nothing to send until one goes through its stop
	} else {
		r.moves = append(r.moves, k)
	}
	r.watchUpgrade(k, w, ts)
}

// next pops the next queued wake: fills first, then a move if fewer than
// MovesInFlight are in flight.
func (r *Reactor) next() (key, *waker, bool) {
	for {
		var k key
		switch {
		case len(r.fills) > 0:
			k, r.fills = r.fills[0], r.fills[1:]
		case len(r.moves) > 0 && r.moving < MovesInFlight:
			k, r.moves = r.moves[0], r.moves[1:]
		default:
			return key{}, nil, false
		}
		if w := r.wakers[k]; w != nil && w.queued {
			return k, w, true
		}
	}
}

func (r *Reactor) work() {
	defer r.wg.Done()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		k, w, ok := r.next()
		for !ok && !r.closed {
			r.ready.Wait()
			k, w, ok = r.next()
		}
		if !ok {
			return
		}
		r.unwatchUpgrade(k, w)
		w.queued, w.inflight = false, true
		move := !w.fill
		if move {
			r.moving++
		}
		b := r.book(k.instrument)
		q, seq := *b.quote, b.seq // the newest quote of the instrument
		ts0 := r.byInst[k.instrument][k.account]
		path, start := b.pathSince(w.since)
		t := Touch{Bid: q[0], Ask: q[1], HighBid: b.bids.since(w.since), LowAsk: b.asks.since(w.since),
			Path: path, PathFrom: pathFrom(ts0, r.rested[k], start, len(path)),
			PathBest:      b.pathBest(ts0, r.rested[k], w.since, start),
			TradedThrough: b.tradedThrough(ts0, r.rested[k], 0), Touched: b.touched(ts0, r.rested[k], 0)}
		if r.onMark != nil {
			t.Marks = b.stack
		}
		r.mu.Unlock()
		r.wake(k.account, k.instrument, t)
		r.mu.Lock()
		if move {
			r.moving--
			r.ready.Signal() // a worker waiting while a move was in flight
		}
		r.restRuleMoves(k, ts0, t, seq)
		// The account's triggers are as its commit left them (Track ran in its
		// After): when a newer quote came during the wake and crosses them,
		// wake again at once; else index it to wait for a quote that does.
		ts := r.byInst[k.instrument][k.account]
		crosses, fill := r.due(k, ts, b, seq+1) // the quotes during the wake
		if crosses && !r.closed && b.seq != seq {
			w.inflight, w.since = false, seq+1
			r.enqueue(k, w, fill, ts)
			continue
		}
		delete(r.wakers, k)
		r.index(k, ts)
	}
}
