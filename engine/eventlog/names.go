package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/events"
)

// The engine names subjects in one logical namespace rooted at "evt"
// (events.SubjectRoot); the log keeps them under its configured prefix, so
// several deployments share one NATS server, each in a stream and subjects of
// its own. phys and logical translate at the log's boundary, and nowhere else.

// phys is the subject the log stores a logical subject under.
func (l *Log) phys(subject string) string {
	if l.prefix == events.SubjectRoot {
		return subject
	}
	if rest, ok := strings.CutPrefix(subject, events.SubjectRoot+"."); ok {
		return l.prefix + "." + rest
	}
	return subject
}

// logical is the engine's name of a subject the log stores.
func (l *Log) logical(subject string) string {
	if l.prefix == events.SubjectRoot {
		return subject
	}
	if rest, ok := strings.CutPrefix(subject, l.prefix+"."); ok {
		return events.SubjectRoot + "." + rest
	}
	return subject
}

// jsStreamSubjectOverlap is the JetStream API's error code for a stream whose
// subjects overlap another stream's.
const jsStreamSubjectOverlap = 10065

// ErrSubjectsTaken means another stream on the server already holds the
// subjects this log's stream would take: another deployment's, or an older
// one of the same name prefix.
var ErrSubjectsTaken = errors.New("eventlog: the log's subjects belong to another stream")

// overlap turns a subject-overlap refusal into an error naming the stream that
// holds the subjects; other errors pass through.
func (l *Log) overlap(ctx context.Context, cfg Config, err error) error {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jsStreamSubjectOverlap {
		return err
	}
	others := []string{}
	list := l.js.StreamNames(ctx, jetstream.WithStreamListSubject(cfg.Prefix+".>"))
	for name := range list.Name() {
		if name != cfg.Stream {
			others = append(others, name)
		}
	}
	return fmt.Errorf("%w: stream %s would keep %s.>, which stream %s already holds on this server; give this deployment names of its own (a different deployment prefix) or point it at that stream: %v",
		ErrSubjectsTaken, cfg.Stream, cfg.Prefix, strings.Join(others, ", "), err)
}

// SnapshotBucket is the name of the key-value bucket that holds the
// aggregate snapshots of the commit stream named stream (engine/snapshot).
// A snapshot only speeds a start up; Restore deletes the bucket, so that a
// restored log starts without snapshots of another history.
func SnapshotBucket(stream string) string { return stream + "_SNAPSHOTS" }
