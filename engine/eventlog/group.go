package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// DefaultGroupAbove is how many appends run on their own before group commit
// starts: below it an append is one publish and one fsync, as fast as it gets;
// above it the disk is the queue, and one atomic batch of everything waiting
// costs one fsync for all of it.
const DefaultGroupAbove = 8

// groupMax bounds one atomic batch (nats-server allows 1,000 messages).
const groupMax = 256

// A batch of at least gatherFrom appends waits up to gatherFor for more, up
// to gatherTo (see gather).
const (
	gatherFrom = 16
	gatherTo   = 64
	gatherFor  = time.Millisecond
)

// groupTimeout bounds one batch's wait for its ack.
const groupTimeout = 10 * time.Second

// grouper is group commit: appends beyond the first few in flight queue here,
// and one committer publishes whatever is queued as one JetStream atomic batch
// (Nats-Batch-Id and Nats-Batch-Sequence on each message, Nats-Batch-Commit on
// the last). Each message keeps its own Nats-Expected-Last-Subject-Sequence
// and Nats-Msg-Id, so the per-aggregate guard is exactly that of a single
// append. A batch is all or nothing: when the server refuses it (a guard
// failed), every member is published again on its own and gets its own answer.
type grouper struct {
	l        *Log
	above    int64
	inflight atomic.Int64
	queue    chan groupReq
	ctx      context.Context
	cancel   context.CancelFunc
	done     sync.WaitGroup
}

type groupReq struct {
	subject, id string
	expected    uint64
	data        []byte
	done        chan groupRes
}

type groupRes struct {
	seq uint64
	err error
}

func startGrouper(l *Log, above int) *grouper {
	if above == 0 {
		above = DefaultGroupAbove
	}
	g := &grouper{l: l, above: int64(above), queue: make(chan groupReq, groupMax)}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.done.Add(1)
	go g.run()
	return g
}

func (g *grouper) stop() {
	g.cancel()
	g.done.Wait()
}

// append publishes one commit on its own while few are in flight, and
// queues it for the next atomic batch otherwise.
func (g *grouper) append(ctx context.Context, subject string, expected uint64, id string, data []byte) (uint64, error) {
	n := g.inflight.Add(1)
	defer g.inflight.Add(-1)
	if n <= g.above {
		return g.l.publish(ctx, subject, expected, id, data)
	}
	r := groupReq{subject: subject, id: id, expected: expected, data: data, done: make(chan groupRes, 1)}
	select {
	case g.queue <- r:
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), errConnectionLost) {
			return 0, fmt.Errorf("append %s: %w", subject, ErrLogUnavailable) // never sent
		}
		return 0, fmt.Errorf("append %s: %w", subject, ctx.Err()) // never sent
	case <-g.ctx.Done():
		return 0, fmt.Errorf("append %s: %w", subject, nats.ErrConnectionClosed) // never sent
	}
	select {
	case res := <-r.done:
		return res.seq, res.err
	case <-ctx.Done():
		return 0, fmt.Errorf("append %s: %v: %w", subject, ctx.Err(), ErrOutcomeUnknown)
	}
}

func (g *grouper) run() {
	defer g.done.Done()
	batch := make([]groupReq, 0, groupMax)
	for {
		batch = batch[:0]
		select {
		case r := <-g.queue:
			batch = append(batch, r)
		case <-g.ctx.Done():
			g.drain()
			return
		}
	fill:
		for len(batch) < groupMax {
			select {
			case r := <-g.queue:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		if len(batch) >= gatherFrom {
			batch = g.gather(batch)
		}
		g.commit(batch)
	}
}

// gather adds appends that arrive within gatherFor to a batch, up to
// gatherTo. nats-server stages each atomic batch of a one-replica file
// stream in a file store of its own, created and removed per batch (on
// disk about 1.5 ms of CPU on the machine of the README's figures, a sixth
// of the engine's CPU per HTTP order at 64 clients; in memory, staging.go,
// still about 7%): under load, fewer and larger batches spend less of it
// per commit. Only a batch that is already large waits, so a lightly loaded
// log never does.
func (g *grouper) gather(batch []groupReq) []groupReq {
	t := time.NewTimer(gatherFor)
	defer t.Stop()
	for len(batch) < gatherTo {
		select {
		case r := <-g.queue:
			batch = append(batch, r)
		case <-t.C:
			return batch
		case <-g.ctx.Done():
			return batch
		}
	}
	return batch
}

// drain answers what is still queued at close: none of it was sent.
func (g *grouper) drain() {
	for {
		select {
		case r := <-g.queue:
			r.done <- groupRes{err: fmt.Errorf("append %s: %w", r.subject, nats.ErrConnectionClosed)}
		default:
			return
		}
	}
}

// commit publishes batch and answers every member.
func (g *grouper) commit(batch []groupReq) {
	ctx, cancel := context.WithTimeout(g.ctx, groupTimeout)
	defer cancel()
	// A batch in flight when the connection breaks ends at once (see
	// Log.onConnection), so the batches queued behind it are not held up.
	ctx, done, err := g.l.onConnection(ctx)
	if err != nil {
		for _, r := range batch {
			r.done <- groupRes{err: fmt.Errorf("append %s: %w", r.subject, err)}
		}
		return
	}
	defer done()
	if len(batch) == 1 {
		r := batch[0]
		seq, err := g.l.publish(ctx, r.subject, r.expected, r.id, r.data)
		r.done <- groupRes{seq, err}
		return
	}
	msgs := make([]BatchMsg, len(batch))
	for i, r := range batch {
		msgs[i] = BatchMsg{Subject: g.l.phys(r.subject), Expected: r.expected, ID: r.id, Data: r.data}
	}
	gen := g.l.tail.generation()
	last, err := PublishBatch(ctx, g.l.nc, msgs)
	switch {
	case err == nil:
		// A batch's messages take consecutive sequences ending at the ack's.
		for i, r := range batch {
			seq := last - uint64(len(batch)-1-i)
			g.l.keep(gen, seq, r.subject, r.id, r.expected, r.data)
			r.done <- groupRes{seq: seq}
		}
	case errors.Is(err, ErrOutcomeUnknown):
		for _, r := range batch {
			r.done <- groupRes{err: fmt.Errorf("append %s: %w", r.subject, err)}
		}
	default: // refused as a whole: nothing was stored; each member on its own
		var wg sync.WaitGroup
		for _, r := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				seq, err := g.l.publish(ctx, r.subject, r.expected, r.id, r.data)
				r.done <- groupRes{seq, err}
			}()
		}
		wg.Wait()
	}
}

// batchAck is the answer to a batch's commit message.
type batchAck struct {
	Seq   uint64 `json:"seq"`
	Count int    `json:"count"`
	Error *struct {
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// ErrBatchRefused is an atomic batch the server did not store: none of it
// was appended.
var ErrBatchRefused = errors.New("eventlog: batch refused")

// BatchMsg is one message of an atomic batch.
type BatchMsg struct {
	Subject  string
	Expected uint64 // Nats-Expected-Last-Subject-Sequence
	ID       string // Nats-Msg-Id; empty: none
	Data     []byte
}

// PublishBatch publishes msgs on nc as one JetStream atomic batch
// (Nats-Batch-Id and Nats-Batch-Sequence on each message, Nats-Batch-Commit
// on the last, which alone asks for the ack) and returns the last message's
// stream sequence: the batch's messages take consecutive sequences ending
// there. The stream must allow atomic publish (nats-server 2.12+).
func PublishBatch(ctx context.Context, nc *nats.Conn, msgs []BatchMsg) (uint64, error) {
	id := nuid.Next()
	for i, b := range msgs {
		m := nats.NewMsg(b.Subject)
		m.Data = b.Data
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(b.Expected, 10))
		if b.ID != "" {
			m.Header.Set(jetstream.MsgIDHeader, b.ID)
		}
		if i < len(msgs)-1 {
			if err := nc.PublishMsg(m); err != nil {
				return 0, fmt.Errorf("%w: %v", ErrBatchRefused, err) // uncommitted: the server drops it
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		resp, err := nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			return 0, fmt.Errorf("batch of %d: %v: %w", len(msgs), err, ErrOutcomeUnknown)
		}
		var ack batchAck
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return 0, fmt.Errorf("batch of %d: %v: %w", len(msgs), err, ErrOutcomeUnknown)
		}
		if ack.Error != nil {
			return 0, fmt.Errorf("%w: %d %s", ErrBatchRefused, ack.Error.ErrCode, ack.Error.Description)
		}
		if ack.Count != len(msgs) || ack.Seq < uint64(len(msgs)) {
			return 0, fmt.Errorf("batch of %d: ack counts %d at %d: %w", len(msgs), ack.Count, ack.Seq, ErrOutcomeUnknown)
		}
		return ack.Seq, nil
	}
	return 0, ErrBatchRefused
}
