package engine

import (
	"context"
	"fmt"

	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
)

// replayDecoded replays the log after sequence from and calls each consumer with
// every decoded commit, in stream order, up to the stream's last sequence as
// of the call, which it returns. Decoding runs on every core and each
// consumer in a goroutine of its own (events.Pipeline), so a cold start uses
// every core instead of reading, decoding and folding one commit after
// another. skip names the messages no consumer wants; they are not decoded.
// watch, if set, sees every message first, in order, on the reading goroutine.
// Consumers must not change the commits they are handed, which they share,
// nor keep the slice once they return.
func replayDecoded(ctx context.Context, log *eventlog.Log, reg events.Registry, from uint64, watch func(eventlog.Msg), skip func(subject string) bool,
	consumers ...func([]events.Committed) error) (uint64, error) {
	p := reg.Pipeline(skip, consumers...)
	last, err := log.Replay(ctx, from, func(m eventlog.Msg) error {
		if watch != nil {
			watch(m)
		}
		return p.Add(events.Raw{Subject: m.Subject, Seq: m.Seq, Data: m.Data})
	})
	if ctx.Err() != nil {
		p.Abort(ctx.Err())
	}
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("replay: %w", err)
	}
	return last, nil
}
