package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/engine/eventlog"
)

// rawLog is an embedded log opened exactly as the engine opens its own (same
// server options, same stream), in a fresh directory, for the raw JetStream
// runs. Each kind of run keeps its subjects' last sequences across windows.
type rawLog struct {
	log     *eventlog.Log
	dir     string
	last    map[string][]uint64
	streams map[string]bool
}

func openRaw(ctx context.Context, o opts, sync string) (*rawLog, error) {
	dir, err := os.MkdirTemp(o.tmp, "bench-raw-")
	if err != nil {
		return nil, err
	}
	l, err := eventlog.Open(ctx, eventlog.Config{DataDir: dir, Sync: sync, Stream: "EVT", Replicas: 1})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &rawLog{log: l, dir: dir, last: map[string][]uint64{}, streams: map[string]bool{}}, nil
}

func (r *rawLog) Close() { r.log.Close(); os.RemoveAll(r.dir) }

func (r *rawLog) lastSeqs(kind string, workers int) []uint64 {
	if r.last[kind] == nil {
		r.last[kind] = make([]uint64, workers)
	}
	return r.last[kind]
}

// stream makes a further stream on the same server (once).
func (r *rawLog) stream(ctx context.Context, name, subjects string, atomic bool) error {
	if r.streams[name] {
		return nil
	}
	_, err := r.log.JetStream().CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subjects},
		Storage: jetstream.FileStorage, Replicas: 1, Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
		Duplicates: 2 * time.Minute, AllowDirect: true, AllowAtomicPublish: atomic})
	r.streams[name] = err == nil
	return err
}

// baseline is raw JetStream: each worker publishes payload with ack to its own
// subject of the engine's stream, guarded by Nats-Expected-Last-Subject-Sequence.
func (r *rawLog) baseline(ctx context.Context, o opts, payload []byte) sample {
	js, last := r.log.JetStream(), r.lastSeqs("baseline", o.workers)
	return drive(ctx, o.workers, o.warm, o.dur, func(ctx context.Context, w, _ int) error {
		m := &nats.Msg{Subject: "evt.bench." + strconv.Itoa(w), Data: payload, Header: nats.Header{}}
		ack, err := js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(last[w]))
		if err != nil {
			return err
		}
		last[w] = ack.Sequence
		return nil
	})
}

// sharded is the baseline spread over several streams on the same server
// (worker w writes to stream w mod streams): one write and fsync queue per stream.
func (r *rawLog) sharded(ctx context.Context, o opts, payload []byte, streams int) (sample, error) {
	for i := range streams {
		if err := r.stream(ctx, fmt.Sprintf("SHARD%d", i), fmt.Sprintf("shard%d.>", i), false); err != nil {
			return sample{}, err
		}
	}
	js, last := r.log.JetStream(), r.lastSeqs(fmt.Sprintf("shard%d", streams), o.workers)
	return drive(ctx, o.workers, o.warm, o.dur, func(ctx context.Context, w, _ int) error {
		m := &nats.Msg{Subject: fmt.Sprintf("shard%d.bench%d.%d", w%streams, streams, w), Data: payload, Header: nats.Header{}}
		ack, err := js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(last[w]))
		if err != nil {
			return err
		}
		last[w] = ack.Sequence
		return nil
	}), nil
}

// batchReq is one append waiting for the group committer.
type batchReq struct {
	subject  string
	expected uint64
	data     []byte
	done     chan batchRes
}

type batchRes struct {
	seq uint64
	err error
}

// groupCommit publishes whatever appends are queued as one JetStream atomic
// batch (Nats-Batch-Id and Nats-Batch-Sequence on each message,
// Nats-Batch-Commit: 1 on the last, which alone asks for the ack), each
// message keeping its own Nats-Expected-Last-Subject-Sequence. With SyncAlways
// nats-server v2.15 stores a committed batch under one fsync. A failed check
// fails the whole batch: every member gets the error.
func groupCommit(ctx context.Context, nc *nats.Conn, in <-chan batchReq, max int) {
	batch := make([]batchReq, 0, max)
	for {
		batch = batch[:0]
		select {
		case r := <-in:
			batch = append(batch, r)
		case <-ctx.Done():
			return
		}
	fill:
		for len(batch) < max {
			select {
			case r := <-in:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		msgs := make([]eventlog.BatchMsg, len(batch))
		for i, r := range batch {
			msgs[i] = eventlog.BatchMsg{Subject: r.subject, Expected: r.expected, Data: r.data}
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		last, err := eventlog.PublishBatch(cctx, nc, msgs)
		cancel()
		for i, r := range batch {
			if err != nil {
				r.done <- batchRes{err: err}
				continue
			}
			// A batch's messages take consecutive sequences ending at the ack's.
			r.done <- batchRes{seq: last - uint64(len(batch)-1-i)}
		}
	}
}

// batched is the baseline's load with every append going through group
// committers that turn concurrent appends into atomic batches.
func (r *rawLog) batched(ctx context.Context, o opts, payload []byte, inflight int) (sample, error) {
	if err := r.stream(ctx, "BATCH", "batch.>", true); err != nil {
		return sample{}, err
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	in := make(chan batchReq, o.workers)
	for range inflight {
		go groupCommit(cctx, r.log.Conn(), in, 1000)
	}
	last := r.lastSeqs(fmt.Sprintf("batch%d", inflight), o.workers)
	dones := make([]chan batchRes, o.workers)
	for w := range dones {
		dones[w] = make(chan batchRes, 1)
	}
	return drive(ctx, o.workers, o.warm, o.dur, func(ctx context.Context, w, _ int) error {
		in <- batchReq{subject: fmt.Sprintf("batch.bench%d.%d", inflight, w), expected: last[w], data: payload, done: dones[w]}
		res := <-dones[w]
		if res.err != nil {
			return res.err
		}
		if res.seq == 0 {
			return errors.New("batch: no sequence")
		}
		last[w] = res.seq
		return nil
	}), nil
}

// pairFloor is the floor of a provider order's two commits in a row (its
// intent before anything is sent, then the provider's answer), paced as
// the provider phase paces its orders: rate pairs a second in all over
// workers clients on their own slots, each pair two appends of payload in
// a row to the client's own subject of a fresh log opened as the engine
// opens its own (same sync, same disk). The sample is each pair's time.
func pairFloor(ctx context.Context, o opts, rate int, payload []byte) (sample, error) {
	r, err := openRaw(ctx, o, o.sync)
	if err != nil {
		return sample{}, err
	}
	defer r.Close()
	js, last := r.log.JetStream(), r.lastSeqs("pair", o.workers)
	s, err := pacedOps(ctx, o, rate, func(ctx context.Context, w int) error {
		for range 2 {
			if err := appendTo(ctx, js, "evt.bench.pair."+strconv.Itoa(w), payload, &last[w]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return sample{}, fmt.Errorf("pair floor: %w", err)
	}
	return s, nil
}

// appendTo appends payload to subject durably, expecting *last as the
// subject's last sequence, and moves *last on.
func appendTo(ctx context.Context, js jetstream.JetStream, subject string, payload []byte, last *uint64) error {
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: payload}, jetstream.WithExpectLastSequencePerSubject(*last))
	if err != nil {
		return err
	}
	*last = ack.Sequence
	return nil
}

// pacedOps runs op at rate ops a second in all over o.workers clients,
// each on its own slots, for o.warm then o.dur; the sample is the time of
// each op of the measured window.
func pacedOps(ctx context.Context, o opts, rate int, op func(ctx context.Context, w int) error) (sample, error) {
	every := time.Duration(int64(o.workers) * int64(time.Second) / int64(rate))
	t0 := time.Now()
	from, end := t0.Add(o.warm), t0.Add(o.warm+o.dur)
	lats := make([][]time.Duration, o.workers)
	errs := make([]error, o.workers)
	var wg sync.WaitGroup
	for w := range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				at := t0.Add(time.Duration(i)*every + time.Duration(w)*every/time.Duration(o.workers))
				if !at.Before(end) || ctx.Err() != nil {
					return
				}
				time.Sleep(time.Until(at))
				start := time.Now()
				if err := op(ctx, w); err != nil {
					errs[w] = err
					return
				}
				if !at.Before(from) {
					lats[w] = append(lats[w], time.Since(start))
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return sample{}, err
	}
	s := sample{Window: o.dur}
	summarize(&s, slices.Concat(lats...))
	return s, nil
}
