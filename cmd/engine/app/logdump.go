package app

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
)

// dumpedEvent and dumpedCommit are the JSON lines of `engine log`: a commit
// with its place in the log, each event under its type name.
type dumpedEvent struct {
	Type string       `json:"type"`
	Data events.Event `json:"data"`
}

type dumpedCommit struct {
	Seq       uint64           `json:"seq"`
	Subject   string           `json:"subject"`
	ID        string           `json:"id"`
	Key       string           `json:"key,omitempty"`
	Principal events.Principal `json:"principal"`
	At        time.Time        `json:"at"`
	Events    []dumpedEvent    `json:"events"`
}

var errDumped = errors.New("dumped enough")

// DumpLog is `engine log`: it prints the commit log as JSON lines, one commit
// a line, decoded from whichever encoding each commit was written in (the
// first is the log's identity commit, with no events). It reads the log the
// engine is configured with, and never writes to it: NATS_URL, or the
// embedded server's files under ENGINE_DATA_DIR, which only one process may
// open at a time (the data directory's lock refuses it while the engine
// runs: stop the engine first).
func DumpLog(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("engine log", flag.ContinueOnError)
	fs.SetOutput(errOut)
	lf := addLogFlags(fs, getenv)
	subject := fs.String("subject", "", "only this aggregate's commits, e.g. evt.account.<accountId>")
	after := fs.Uint64("after", 0, "only commits after this sequence")
	limit := fs.Int("limit", 0, "at most this many commits; 0: all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := lf.existing("engine log"); err != nil {
		return err
	}
	l, err := eventlog.Open(ctx, eventlog.Config{URL: lf.natsURL, DataDir: lf.dataDir, Sync: "always", Stream: lf.names().CommitStream(), Prefix: lf.names().CommitPrefix(), Replicas: 1, ReadOnly: true})
	if err != nil {
		return err
	}
	defer l.Close()
	reg := engine.Registry()
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	n := 0
	print := func(m eventlog.Msg) error {
		if m.Seq <= *after {
			return nil
		}
		c, err := reg.Decode(m.Data)
		if err != nil {
			return fmt.Errorf("commit %d on %s: %w", m.Seq, m.Subject, err)
		}
		d := dumpedCommit{Seq: m.Seq, Subject: m.Subject, ID: c.CommandID, Key: c.Key, Principal: c.Principal, At: c.At,
			Events: make([]dumpedEvent, len(c.Events))}
		for i, e := range c.Events {
			d.Events[i] = dumpedEvent{e.Type(), e}
		}
		if err := enc.Encode(d); err != nil {
			return err
		}
		if n++; *limit > 0 && n >= *limit {
			return errDumped
		}
		return nil
	}
	if *subject != "" {
		_, err = l.Load(ctx, *subject, print)
	} else {
		_, err = l.Replay(ctx, *after, print)
	}
	if errors.Is(err, errDumped) {
		err = nil
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}
