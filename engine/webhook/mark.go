package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/engine/eventlog"
)

// The replay mark. A start of the reactor needs the log's endpoints, which
// firm commits hold, and the deliveries not yet final, which only commits
// from some point on can yield. The mark M is that point: every delivery
// derived from a commit before M is final (delivered, out of attempts, its
// endpoint removed, or dropped after a panic). A start with a mark reads the
// firm subjects up to M-1 for the endpoints alone, yielding no delivery, and
// everything from M on as a start without one reads the whole log; an
// account opened before M is learnt when its first commit from M on
// arrives, from its subject's first commit (learn).
//
// The running reactor computes its mark (Reactor.mark) from its own state:
// the smallest source sequence among the deliveries queued, waiting for a
// retry, in flight or taken by another node, or the router's position plus
// one when none is. It saves the mark every MarkEvery when it advanced, and
// at Close. Only a reactor that was started saves one: in a cluster, the
// leader's (cmd/engine/app deliverWebhooks). A reactor deposed while it
// delivers may save a mark after its successor did; either mark holds for
// the log (a delivery the successor took from it pins the deposed one's
// mark), so an older one only makes the next start read more.
//
// The mark lives in a key-value bucket beside the commit stream
// (MarkBucket), not in the log: it is a derived checkpoint, rewritten every
// MarkEvery, that no reader of the log needs, and an event of its own would
// grow the log with every save and ask every reader of the webhook ledger to
// know it. Losing it only means a start reads the whole log, as it did
// before marks. A mark is used only if it names the log's identity
// (eventlog.Log.ID), is at or below the log's last sequence plus one, and the
// commit before it is the one it names: a log restored from an older backup
// keeps its identity, and its history past the backup differs.

// DefaultMarkEvery is how often a running reactor saves its replay mark
// when it advanced.
const DefaultMarkEvery = 30 * time.Second

// markFormat is the version of a saved mark; another is ignored.
const markFormat = 1

// markKey is the bucket's key of the mark.
const markKey = "mark"

// MarkBucket is the name of the key-value bucket that holds the webhook
// reactor's replay mark of the commit stream named stream.
func MarkBucket(stream string) string { return stream + "_WEBHOOKMARK" }

// savedMark is the mark's value in the bucket.
type savedMark struct {
	Format int    `json:"format"`
	Log    string `json:"log"`    // the log's identity
	Seq    uint64 `json:"seq"`    // M
	Before string `json:"before"` // the id of the commit at M-1 ("" when M is 1)
}

// openMarks opens the mark's bucket, creating it when missing, with the
// commit stream's replicas. nil (and no error) when the log has no identity.
func (r *Reactor) openMarks(ctx context.Context) (jetstream.KeyValue, error) {
	l := r.cfg.Log
	if l.ID() == "" {
		return nil, nil
	}
	kc := jetstream.KeyValueConfig{Bucket: MarkBucket(l.StreamName()), History: 1, Replicas: l.Durability().Replicas,
		Storage:     jetstream.FileStorage,
		Description: "the webhook reactor's replay mark of stream " + l.StreamName() + " (engine/webhook); it only speeds a start up and may be deleted"}
	var kv jetstream.KeyValue
	err := eventlog.RetryTimeouts(ctx, func(ctx context.Context) (err error) {
		kv, err = l.JetStream().CreateOrUpdateKeyValue(ctx, kc)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("webhook: mark bucket: %w", err)
	}
	return kv, nil
}

// loadMark is the saved mark, if there is one this log can use (see the
// conditions above); 0 when there is none. It only fails when the log
// cannot be read.
func (r *Reactor) loadMark(ctx context.Context) (uint64, error) {
	if r.marks == nil {
		return 0, nil
	}
	e, err := r.marks.Get(ctx, markKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		slog.Warn("webhook: reading the replay mark; the start reads the whole log", "err", err)
		return 0, nil
	}
	var m savedMark
	ignore := func(why string) (uint64, error) {
		slog.Warn("webhook: the replay mark is ignored; the start reads the whole log", "why", why, "mark", m.Seq)
		return 0, nil
	}
	if err := json.Unmarshal(e.Value(), &m); err != nil || m.Format != markFormat {
		return ignore("not a mark of this version")
	}
	l := r.cfg.Log
	if m.Log != l.ID() {
		return ignore("a mark of another log (" + m.Log + ")")
	}
	if m.Seq <= 1 {
		return 0, nil
	}
	last, err := l.LastSeq(ctx)
	if err != nil {
		return 0, err
	}
	if m.Seq-1 > last {
		return ignore(fmt.Sprintf("past the log's last commit %d", last))
	}
	before, err := l.At(ctx, m.Seq-1)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return ignore("the commit before it is not in the log")
	}
	if err != nil {
		return 0, err
	}
	if before.ID != m.Before {
		return ignore("the commit before it is not the one it names (a log restored from an older backup?)")
	}
	return m.Seq, nil
}

// saveMark saves m as the mark, unless it is no further than the last one
// saved or read.
func (r *Reactor) saveMark(ctx context.Context, m uint64) {
	if r.marks == nil || m <= r.saved {
		return
	}
	v := savedMark{Format: markFormat, Log: r.cfg.Log.ID(), Seq: m}
	if m > 1 {
		before, err := r.cfg.Log.At(ctx, m-1)
		if err != nil {
			slog.Warn("webhook: saving the replay mark", "mark", m, "err", err)
			return
		}
		v.Before = before.ID
	}
	b, err := json.Marshal(v)
	if err != nil {
		slog.Warn("webhook: saving the replay mark", "mark", m, "err", err)
		return
	}
	if _, err := r.marks.Put(ctx, markKey, b); err != nil {
		slog.Warn("webhook: saving the replay mark", "mark", m, "err", err)
		return
	}
	r.saved = m
}

// keepMark saves the mark every MarkEvery when it advanced, until Close.
func (r *Reactor) keepMark() {
	defer r.loops.Done()
	t := time.NewTicker(r.cfg.MarkEvery)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		r.saveMark(ctx, r.mark())
		cancel()
	}
}

// mark is the replay mark of the reactor's state now: the smallest source
// sequence of a delivery not final on any endpoint, else the router's
// position plus one. The position is read first: the deliveries of every
// commit up to it are on their endpoints by then.
func (r *Reactor) mark() uint64 {
	m := r.pos.Load() + 1
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, byID := range r.eps {
		for _, ep := range byID {
			if s := ep.oldest(); s > 0 {
				m = min(m, s)
			}
		}
	}
	return m
}

// oldest is the smallest source sequence of ep's deliveries not final
// (queued, waiting for a retry, held by an attempt, or taken by another
// node); 0 when there is none.
func (ep *endpoint) oldest() uint64 {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	m := ep.pinned
	low := func(s uint64) {
		if m == 0 || s < m {
			m = s
		}
	}
	for _, d := range ep.ready {
		low(d.seq)
	}
	for _, d := range ep.retry {
		low(d.seq)
	}
	for d := range ep.held {
		low(d.seq)
	}
	return m
}
