package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/events"
)

// idSubjectBody is the subject body of the identity commit: "evt.log".
const idSubjectBody = "log"

// identityCommit is the identity commit as the log holds it: a commit with no
// events, in the JSON form that every version of the engine reads, whose id
// is the log's id. Readers that do not look for it fold it as nothing.
type identityCommit struct {
	events.Commit
	Events []struct{} `json:"events"`
}

// ID is the log's identity, a ULID made when the log was: the id of its
// identity commit, an empty commit on the subject <prefix>.log that Open
// writes as a new stream's first commit (and after the last one, once, into
// a stream from before logs had ids). Read models record the id of the log
// they were folded from. The id travels with the commits through a backup and
// a restore, which the stream's creation stamp does not (nats-server 2.15's
// snapshots carry no creation time, and a restore creates the stream anew).
// It is "" only for a log opened ReadOnly that has no identity commit.
func (l *Log) ID() string { return l.id }

// IDSubject is the subject of the identity commit.
func (l *Log) IDSubject() string { return l.Subject(idSubjectBody) }

// identify reads the log's identity commit, writing it first when there is
// none (unless readOnly). Two processes opening a new stream at once write
// one identity between them: the append expects the subject to be empty.
func (l *Log) identify(ctx context.Context, readOnly bool) error {
	for attempt := 0; ; attempt++ {
		id, err := l.readID(ctx)
		if err != nil || id != "" || readOnly {
			l.id = id
			return err
		}
		if attempt > 0 {
			return errors.New("eventlog: identity commit written but not found")
		}
		c := identityCommit{Commit: events.Commit{CommandID: ulid.Make().String(), Key: "log", At: time.Now().UTC()}, Events: []struct{}{}}
		data, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("eventlog: identity: %w", err)
		}
		_, err = l.publish(ctx, l.IDSubject(), 0, c.CommandID, data)
		if err != nil && !errors.Is(err, ErrConcurrency) { // another process wrote it first
			return fmt.Errorf("eventlog: write identity: %w", err)
		}
	}
}

// readID is the id of the stream's identity commit ("" when none).
func (l *Log) readID(ctx context.Context) (string, error) {
	m, err := l.lastMsg(ctx, l.phys(l.IDSubject()))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("eventlog: read identity: %w", err)
	}
	return parseID(m.Data, m.Sequence)
}

func parseID(data []byte, seq uint64) (string, error) {
	var c identityCommit
	if err := json.Unmarshal(data, &c); err != nil || c.CommandID == "" {
		return "", fmt.Errorf("eventlog: identity commit at %d is unreadable: %q", seq, data)
	}
	return c.CommandID, nil
}
