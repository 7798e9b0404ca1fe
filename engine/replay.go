package engine

import (
	"context"
	"fmt"
	"runtime"

	"golang.org/x/sync/errgroup"

	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
)

// replayChunk is how many messages travel together through the replay's
// stages: enough to make a channel hand-off cheap, small enough to keep every
// core busy from the first chunk.
const replayChunk = 256

// replayDecoded replays the log from its start and calls each consumer with
// every decoded commit, in stream order, up to the stream's last sequence as
// of the call, which it returns. One goroutine reads, one per core decodes
// (chunks are independent), and every consumer runs in a goroutine of its own
// on the same ordered chunks, so a cold start uses every core instead of
// reading, decoding and folding one commit after another. skip names the
// messages no consumer wants; they are not decoded. Consumers must not change
// the commits they are handed: they share them.
func replayDecoded(ctx context.Context, log *eventlog.Log, reg events.Registry, skip func(subject string) bool, consumers ...func([]events.Committed) error) (uint64, error) {
	type chunk struct {
		msgs []eventlog.Msg
		out  chan []events.Committed // the decoded chunk, once
	}
	g, ctx := errgroup.WithContext(ctx)
	work := make(chan chunk, 8)
	order := make(chan chan []events.Committed, 64)
	for range runtime.GOMAXPROCS(0) {
		g.Go(func() error {
			for c := range work {
				out := make([]events.Committed, 0, len(c.msgs))
				for _, m := range c.msgs {
					if skip(m.Subject) {
						continue
					}
					cm, err := reg.Decode(m.Data)
					if err != nil {
						return fmt.Errorf("replay %s at %d: %w", m.Subject, m.Seq, err)
					}
					out = append(out, events.Committed{Subject: m.Subject, Seq: m.Seq, Commit: cm})
				}
				c.out <- out
			}
			return nil
		})
	}
	feeds := make([]chan []events.Committed, len(consumers))
	for i, fn := range consumers {
		feeds[i] = make(chan []events.Committed, 64)
		g.Go(func() error {
			for cs := range feeds[i] {
				if err := fn(cs); err != nil {
					return err
				}
			}
			return nil
		})
	}
	g.Go(func() error { // hands decoded chunks on in stream order
		defer func() {
			for _, f := range feeds {
				close(f)
			}
		}()
		for res := range order {
			var cs []events.Committed
			select {
			case cs = <-res:
			case <-ctx.Done():
				return ctx.Err()
			}
			for _, f := range feeds {
				select {
				case f <- cs:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return nil
	})
	var last uint64
	g.Go(func() error {
		defer close(order)
		defer close(work)
		cur := chunk{out: make(chan []events.Committed, 1)}
		send := func() error {
			if !trySend(ctx, order, cur.out) || !trySend(ctx, work, cur) {
				return ctx.Err()
			}
			cur = chunk{out: make(chan []events.Committed, 1)}
			return nil
		}
		var err error
		last, err = log.Replay(ctx, 0, func(m eventlog.Msg) error {
			cur.msgs = append(cur.msgs, m)
			if len(cur.msgs) < replayChunk {
				return nil
			}
			return send()
		})
		if err == nil && len(cur.msgs) > 0 {
			err = send()
		}
		return err
	})
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return last, nil
}

// trySend sends v on ch unless ctx ends first.
func trySend[T any](ctx context.Context, ch chan<- T, v T) bool {
	select {
	case ch <- v:
		return true
	case <-ctx.Done():
		return false
	}
}
