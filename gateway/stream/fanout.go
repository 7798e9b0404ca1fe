package stream

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/svc/engine/gateway/httpx"
)

// The fan-out writes each account's newest payload of each name to all its
// subscribers, in passes over them split among up to GOMAXPROCS goroutines.
// A pass stops as soon as a newer payload of its name arrives, and the next
// pass, with that payload, starts where it stopped: when a pass takes longer
// than payloads take to come, every subscriber still gets the newest one
// within about one pass, and no frame waits for an older one to reach everyone.

// fanoutShare is the fewest subscribers one fan-out goroutine takes.
const fanoutShare = 256

// fanoutBatch is how many subscribers a fan-out goroutine claims at a time.
const fanoutBatch = 32

type feedKey struct{ account, name string }

// feed is the newest payload of one name for one account.
type feed struct {
	newest atomic.Pointer[Payload]
	fanned *Payload // what the last complete pass wrote; the fan-out's own
	cursor int      // where the next pass starts; the fan-out's own
}

// Send renders p once and queues it for every subscriber of the account, for
// Run's fan-out to write; of payloads with one name, the newest revision wins.
// It never blocks on a subscriber.
func (h *Hub) Send(accountID string, p Payload) {
	if p.chunk == nil { // else rendered with its chunk (render)
		p.wire = p.Wire()
		p.chunk = httpx.AppendChunk(make([]byte, 0, len(p.wire)+16), p.wire)
	}
	k := feedKey{accountID, p.Name}
	h.fmu.Lock()
	f := h.feeds[k]
	if f == nil {
		f = &feed{}
		h.feeds[k] = f
	}
	if old := f.newest.Load(); old != nil && old.Rev > p.Rev {
		h.fmu.Unlock()
		return
	}
	f.newest.Store(&p)
	h.due[k] = struct{}{}
	h.fmu.Unlock()
	select {
	case h.fanWake <- struct{}{}:
	default:
	}
}

// fan runs passes over due feeds until ctx ends.
func (h *Hub) fan(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.fanWake:
		}
		for {
			k, f, ok := h.nextDue()
			if !ok {
				break
			}
			if f != nil {
				h.passSafely(k, f)
			}
		}
	}
}

// passSafely is pass with a panic contained to that one pass.
func (h *Hub) passSafely(k feedKey, f *feed) {
	defer func() {
		if v := recover(); v != nil {
			slog.Error("panic contained", "in", "stream fan-out", "panic", fmt.Sprint(v))
		}
	}()
	h.pass(k, f)
}

func (h *Hub) nextDue() (feedKey, *feed, bool) {
	h.fmu.Lock()
	defer h.fmu.Unlock()
	for k := range h.due {
		delete(h.due, k)
		return k, h.feeds[k], true
	}
	return feedKey{}, nil, false
}

// pass offers the feed's newest payload to the account's subscribers, from
// the feed's cursor on, until all have it or a newer payload arrives (Send
// then marked the feed due again).
func (h *Hub) pass(k feedKey, f *feed) {
	p := f.newest.Load()
	if p == f.fanned {
		return
	}
	subs := h.list(k.account)
	n := len(subs)
	if n == 0 {
		h.fmu.Lock()
		if f.newest.Load() == p {
			delete(h.feeds, k)
		}
		h.fmu.Unlock()
		return
	}
	start := f.cursor % n
	var done int
	if extra := max(1, min(h.workers, n/fanoutShare)) - 1; extra == 0 {
		ps := passShare{f: f, p: p, subs: subs, start: start} // on the stack: no goroutine shares it
		ps.work()
		done = ps.claimed()
	} else {
		ps := &passShare{f: f, p: p, subs: subs, start: start}
		var wg sync.WaitGroup
		for range extra {
			wg.Go(ps.work)
		}
		ps.work()
		wg.Wait()
		done = ps.claimed()
	}
	f.cursor = (start + done) % n
	if done == n {
		f.fanned = p
	}
}

// passShare is one pass's subscribers, which its goroutines claim in
// batches of fanoutBatch.
type passShare struct {
	f     *feed
	p     *Payload
	subs  []*Sub
	start int
	next  atomic.Int64
}

// work offers p to claimed batches until none is left or a newer payload arrives.
func (ps *passShare) work() {
	n := len(ps.subs)
	for ps.f.newest.Load() == ps.p {
		i := int(ps.next.Add(fanoutBatch)) - fanoutBatch
		if i >= n {
			return
		}
		for j := i; j < min(i+fanoutBatch, n); j++ {
			ps.subs[(ps.start+j)%n].offer(*ps.p)
		}
	}
}

// claimed is how many subscribers were offered p: every claimed one was.
func (ps *passShare) claimed() int { return min(int(ps.next.Load()), len(ps.subs)) }
