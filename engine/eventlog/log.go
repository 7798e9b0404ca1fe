// Package eventlog is the engine's client of the commit log: a JetStream stream
// with one subject per aggregate, embedded in-process by default.
package eventlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/mod/semver"

	"github.com/svc/engine/events"
)

// ErrConcurrency means the subject moved past the expected sequence: reload and decide again.
var ErrConcurrency = errors.New("eventlog: wrong last sequence")

// ErrLogUnavailable means the log's connection is down and the append was
// refused before anything was sent: nothing was recorded, retry with the same key.
var ErrLogUnavailable = errors.New("eventlog: the log is not connected; nothing was sent")

// ErrOutcomeUnknown means the append was sent but its acknowledgement was lost:
// the commit may or may not be in the log.
var ErrOutcomeUnknown = errors.New("eventlog: append outcome unknown")

// Config selects and shapes the log.
type Config struct {
	URL      string // empty: embedded server
	DataDir  string // embedded storage lives under DataDir/nats
	Sync     string // "always" (fsync before ack) or "interval"
	Replicas int
	Stream   string // stream name; subjects are "<prefix>.>"
	Prefix   string // subject prefix, default "evt"
	// Recent, if set, receives every commit appended through this log's
	// mailboxes, decoded, for readers in the same process.
	Recent *events.Recent
	// GroupAbove is how many appends may be in flight on their own before
	// further ones are grouped into atomic batches (group commit, on the
	// embedded server and on an external one of nats-server 2.12 or later);
	// 0: DefaultGroupAbove; below 0: every append is grouped.
	GroupAbove int
	// SoleWriter says no other process appends to this log (one engine, not
	// a node of a cluster): FollowCommits then hands out the commits this
	// log appended from its own tail (tail.go) instead of having the server
	// deliver them back, and reads from the log only what the tail lacks.
	// Another writer's commits are still delivered, in order, only later
	// (tailGap, tailIdle).
	SoleWriter bool
	// ReadOnly opens an existing log to read it (engine log, engine backup):
	// a missing stream is an error, and Open neither changes the stream nor
	// writes the log's identity into a log that has none.
	ReadOnly bool
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	var errs []error
	if c.URL == "" && c.DataDir == "" {
		errs = append(errs, errors.New("eventlog: DataDir is required for the embedded server"))
	}
	if c.Sync != "always" && c.Sync != "interval" {
		errs = append(errs, fmt.Errorf("eventlog: sync %q is neither always nor interval", c.Sync))
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("eventlog: replicas %d outside 1..5", c.Replicas))
	}
	return errors.Join(errs...)
}

// Log is an open commit log.
type Log struct {
	srv    *server.Server
	lock   *os.File // the embedded data directory's lock (lock.go); nil on an external server
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	name   string
	prefix string
	id     string // the log's identity (identity.go)
	recent *events.Recent
	group  *grouper // nil: no group commit
	tail   *tail    // nil: FollowCommits reads every commit from the server (Config.SoleWriter)
	sole   bool     // Config.SoleWriter
	// natsDir is the embedded server's store directory (empty: an external
	// server); staging is the directory in memory where it stages atomic
	// batches (staging.go; empty: on disk).
	natsDir, staging string

	connMu sync.Mutex
	conn   context.Context // ends when the connection in use breaks; a new one per reconnect
	lose   context.CancelCauseFunc

	reads chan struct{} // bounded reads in flight (maxReads)
}

// errConnectionLost is why an append in flight ends when the connection
// breaks: its ack went with the connection and will never come.
var errConnectionLost = errors.New("eventlog: the connection broke before the ack came")

// Open starts the embedded server (unless cfg.URL is set), connects, ensures
// the stream and reads the log's identity, writing it first into a log that
// has none (see ID). The embedded server's data directory is locked for as
// long as the log is open: a second Open of it, in this process or another,
// fails at once with a *LockedError (ErrLocked).
func Open(ctx context.Context, cfg Config) (*Log, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l, err := dial(cfg)
	if err != nil {
		return nil, err
	}
	if err := l.ensureStream(ctx, cfg); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.identify(ctx, cfg.ReadOnly); err != nil {
		l.Close()
		return nil, err
	}
	// Group commit only where the stream really takes atomic batches.
	if !cfg.ReadOnly && l.stream.CachedInfo().Config.AllowAtomicPublish {
		if l.srv != nil {
			var err error
			if l.staging, err = stageBatchesInMemory(l.natsDir, cfg.Stream); err != nil {
				// Correct either way: staged on disk, as nats-server does it, only slower.
				slog.Warn("eventlog: atomic batches stay staged on disk", "err", err)
			}
		}
		l.group = startGrouper(l, cfg.GroupAbove)
	}
	return l, nil
}

// withDefaults fills the defaults in and validates.
func (c Config) withDefaults() (Config, error) {
	if c.Stream == "" {
		c.Stream = "EVT"
	}
	if c.Prefix == "" {
		c.Prefix = "evt"
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	return c, c.Validate()
}

// dial locks the data directory and starts the embedded server (unless
// cfg.URL is set), and connects; it does not touch the stream.
func dial(cfg Config) (*Log, error) {
	l := &Log{name: cfg.Stream, prefix: cfg.Prefix, recent: cfg.Recent, reads: make(chan struct{}, maxReads)}
	if cfg.SoleWriter && !cfg.ReadOnly {
		l.tail = newTail(tailSize)
	}
	l.sole = cfg.SoleWriter
	l.conn, l.lose = l.newConn()
	track := []nats.Option{nats.DisconnectErrHandler(l.lost), nats.ReconnectHandler(l.reconnected)}
	var err error
	if cfg.URL == "" {
		dir := filepath.Join(cfg.DataDir, "nats")
		l.natsDir = dir
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("eventlog: %w", err)
		}
		if l.lock, err = lockDir(cfg.DataDir); err != nil {
			return nil, err
		}
		opts := &server.Options{
			ServerName: "engine",
			JetStream:  true,
			StoreDir:   dir,
			DontListen: true,
			NoSigs:     true,
			NoLog:      true,
			SyncAlways: cfg.Sync == "always",
		}
		l.srv, err = server.NewServer(opts)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("eventlog: embedded server: %w", err)
		}
		l.srv.Start()
		if !l.srv.ReadyForConnections(30 * time.Second) {
			l.Close()
			return nil, errors.New("eventlog: embedded server not ready")
		}
		l.nc, err = nats.Connect("", append(track, nats.InProcessServer(inProcess{l.srv}), nats.MaxReconnects(-1))...)
	} else {
		// No reconnect buffer: a publish while disconnected fails at once
		// (ErrLogUnavailable) instead of leaving after a reconnect.
		l.nc, err = nats.Connect(cfg.URL, append(track, nats.MaxReconnects(-1), nats.Name("engine"), nats.ReconnectBufSize(-1),
			nats.ReconnectWait(250*time.Millisecond), nats.Timeout(2*time.Second),
			// A server that stops answering (paused, cut off) keeps the TCP
			// connection open: pings find it in about 3 s, not the default 4 minutes.
			nats.PingInterval(time.Second), nats.MaxPingsOutstanding(3))...)
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("eventlog: connect: %w", err)
	}
	l.js, err = jetstream.New(l.nc)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("eventlog: %w", err)
	}
	return l, nil
}

// ensureStream creates or updates the commit stream, or with cfg.ReadOnly
// finds it.
func (l *Log) ensureStream(ctx context.Context, cfg Config) error {
	var err error
	if cfg.ReadOnly {
		l.stream, err = l.js.Stream(ctx, cfg.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("eventlog: no stream %s: %w", cfg.Stream, err)
		}
		if err != nil {
			return fmt.Errorf("eventlog: stream %s: %w", cfg.Stream, err)
		}
		return nil
	}
	sc := jetstream.StreamConfig{
		Name:        cfg.Stream,
		Subjects:    []string{cfg.Prefix + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Duplicates:  DuplicateWindow,
		AllowDirect: true,
		// Atomic batches (group commit) need nats-server 2.12; the embedded
		// one is 2.15, an external one says its version when we connect.
		AllowAtomicPublish: l.srv != nil || atLeast(l.nc.ConnectedServerVersion(), "v2.12.0"),
	}
	l.stream, err = l.createStream(ctx, sc)
	var apiErr *jetstream.APIError
	if err != nil && sc.AllowAtomicPublish && l.srv == nil && errors.As(err, &apiErr) {
		// A cluster mid-upgrade may hold servers older than the one we
		// reached and refuse the setting: the stream is then kept without
		// atomic batches. (A timeout is no such refusal: see createStream.)
		sc.AllowAtomicPublish = false
		l.stream, err = l.createStream(ctx, sc)
	}
	if err != nil {
		return l.overlap(ctx, cfg, fmt.Errorf("eventlog: stream %s: %w", cfg.Stream, err))
	}
	return nil
}

// createStream creates or updates the commit stream (CreateStream).
func (l *Log) createStream(ctx context.Context, sc jetstream.StreamConfig) (jetstream.Stream, error) {
	return CreateStream(ctx, l.js, sc)
}

// CreateStream creates or updates a stream (RetryTimeouts).
func CreateStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) (jetstream.Stream, error) {
	var st jetstream.Stream
	err := RetryTimeouts(ctx, func(ctx context.Context) (err error) {
		st, err = js.CreateOrUpdateStream(ctx, sc)
		return err
	})
	return st, err
}

// RetryTimeouts runs a JetStream API call that creates or updates something
// (a stream, a bucket) with a 2 s deadline each time, and asks again while
// the cluster is not whole, for up to PlacementWait: after a timeout (nodes
// starting at once race to create the same thing and the server answers one;
// a cluster without its meta leader answers nothing) and after an answer of
// a cluster still forming (notWhole). Any other answer is final.
func RetryTimeouts(ctx context.Context, op func(context.Context) error) error {
	begun := time.Now()
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := op(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !notWhole(err) {
			return err
		}
		waited := time.Since(begun)
		if waited >= PlacementWait {
			return fmt.Errorf("%w (asked %d times over %v while the JetStream cluster was not whole)", err, attempt, waited.Round(time.Second))
		}
		slog.Warn("eventlog: the JetStream cluster is not whole yet; asking again", "err", err, "attempt", attempt,
			"waited", waited.Round(time.Millisecond).String(), "for_at_most", PlacementWait.String())
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(100*min(attempt, 10)) * time.Millisecond):
		}
	}
}

// PlacementWait bounds how long RetryTimeouts asks again while the cluster is
// not whole: servers restarting rejoin within it, and a cluster short of its
// quorum or of a peer for longer fails the start with the server's own words.
var PlacementWait = time.Minute

// notWhole reports whether an API call's error is one of a JetStream
// cluster that is not whole yet, which passes without anything changing on
// our side: a timeout, no responders, a connection reconnecting, no
// suitable peers while a peer is not yet heard from (10005, "peer offline"),
// results incomplete (10004), JetStream temporarily unavailable (10008, no
// meta leader) or no leader to handle the request (10009).
func notWhole(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
			errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrConnectionReconnecting)
	}
	switch apiErr.ErrorCode {
	case 10004, 10008, 10009:
		return true
	case 10005:
		return strings.Contains(apiErr.Description, "peer offline")
	}
	return false
}

// SoleWriter reports whether no other process appends to this log
// (Config.SoleWriter): what this process decided on is then the log's last word.
func (l *Log) SoleWriter() bool { return l.sole }

// GroupCommit reports whether appends beyond the in-flight threshold travel
// as atomic batches (the server and the stream allow them).
func (l *Log) GroupCommit() bool { return l.group != nil }

// atLeast reports whether a nats-server version ("2.12.1") is at least min ("v2.12.0").
func atLeast(version, min string) bool {
	v := "v" + strings.TrimPrefix(version, "v")
	return semver.IsValid(v) && semver.Compare(v, min) >= 0
}

// Recent is the hand-off of decoded commits to readers in this process (may be nil).
func (l *Log) Recent() *events.Recent { return l.recent }

// Conn is the underlying NATS connection (for key-value buckets and benchmarks).
func (l *Log) Conn() *nats.Conn { return l.nc }

// JetStream is the JetStream context of the log's connection.
func (l *Log) JetStream() jetstream.JetStream { return l.js }

// StreamName is the name of the commit stream.
func (l *Log) StreamName() string { return l.name }

// Subject is the logical subject of a subject body: Subject("account.x") is
// "evt.account.x", whatever prefix the log keeps it under.
func (l *Log) Subject(body string) string { return events.SubjectRoot + "." + body }

// Connected reports whether the log's connection is up and appends may be
// sent on it: after a reconnect, only once the new connection's context is
// in place (nats.go reports the connection up before its reconnect
// handler has run; until then an append is refused, ErrLogUnavailable).
func (l *Log) Connected() bool {
	if l.nc == nil || !l.nc.IsConnected() {
		return false
	}
	l.connMu.Lock()
	conn := l.conn
	l.connMu.Unlock()
	return conn == nil || conn.Err() == nil
}

// lost ends the appends waiting on the connection that broke (nats.go keeps
// a request waiting across a reconnect, for an ack that will never come).
func (l *Log) lost(*nats.Conn, error) {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	l.lose(errConnectionLost)
}

// reconnected starts the context of the new connection.
func (l *Log) reconnected(*nats.Conn) {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	l.lose(errConnectionLost)
	l.conn, l.lose = l.newConn()
	if l.tail != nil {
		l.tail.clear()
	}
}

// connKey is the key of the log whose connection a context ends with
// (newConn, CommitContext).
type connKey struct{}

// newConn is the context of a connection: it names the log (connKey), so a
// context made from it is known to end with the connection (CommitContext).
func (l *Log) newConn() (context.Context, context.CancelCauseFunc) {
	return context.WithCancelCause(context.WithValue(context.Background(), connKey{}, l))
}

// CommitContext is a context for appends that ends at deadline or when the
// connection in use now breaks, whichever comes first (cause
// errConnectionLost). Append takes it as it is, instead of making a context
// of its own for that (onConnection): one context an append rather than
// three, and that one reused (commitCtx). cancel must be called once, when
// the appends are done, and the context not used after it: it may serve
// another append then.
func (l *Log) CommitContext(deadline time.Time) (context.Context, context.CancelFunc) {
	l.connMu.Lock()
	conn := l.conn
	l.connMu.Unlock()
	c := commitCtxs.get(conn, deadline)
	return c, c.cancel
}

// onConn reports whether ctx ends when a connection of this log breaks
// (CommitContext).
func (l *Log) onConn(ctx context.Context) bool {
	owner, _ := ctx.Value(connKey{}).(*Log)
	return owner == l
}

// onConnection is ctx, also ended with cause errConnectionLost when the
// connection in use now breaks; it fails with ErrLogUnavailable, before
// anything is sent, when that connection has already broken.
func (l *Log) onConnection(ctx context.Context) (context.Context, context.CancelFunc, error) {
	l.connMu.Lock()
	conn := l.conn
	l.connMu.Unlock()
	if conn.Err() != nil {
		return nil, nil, ErrLogUnavailable
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(conn, func() { cancel(context.Cause(conn)) })
	return ctx, func() { stop(); cancel(nil) }, nil
}

// Close disconnects and stops the embedded server, waiting for it to flush,
// and releases the data directory's lock.
func (l *Log) Close() {
	if l.group != nil {
		l.group.stop()
	}
	if l.nc != nil {
		l.nc.Drain()
		l.nc.Close()
	}
	if l.srv != nil {
		l.srv.Shutdown()
		l.srv.WaitForShutdown()
		unstageBatches(l.natsDir, l.name, l.staging)
	}
	if l.lock != nil {
		unlockDir(l.lock) // only once the server has let go of the files
		l.lock = nil
	}
}

// Append publishes one commit to subject, guarded by the subject's expected last
// sequence (0: the subject must be empty). msgID is the commit's dedupe id.
// It returns the commit's stream sequence.
func (l *Log) Append(ctx context.Context, subject string, expected uint64, msgID string, data []byte) (uint64, error) {
	if !l.nc.IsConnected() {
		// Refused before sending: the client library would otherwise buffer
		// the message and send it after a reconnect, long after its answer.
		return 0, fmt.Errorf("append %s: %w", subject, ErrLogUnavailable)
	}
	// An append in flight when the connection breaks answers at once: its
	// outcome is unknown, and waiting longer cannot tell.
	if l.onConn(ctx) { // made so (CommitContext)
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), errConnectionLost) {
			return 0, fmt.Errorf("append %s: %w", subject, ErrLogUnavailable) // that connection broke: nothing was sent
		}
	} else {
		var done context.CancelFunc
		var err error
		if ctx, done, err = l.onConnection(ctx); err != nil {
			return 0, fmt.Errorf("append %s: %w", subject, err)
		}
		defer done()
	}
	if l.group != nil {
		return l.group.append(ctx, subject, expected, msgID, data)
	}
	return l.publish(ctx, subject, expected, msgID, data)
}

// publish appends one commit on its own.
func (l *Log) publish(ctx context.Context, subject string, expected uint64, msgID string, data []byte) (uint64, error) {
	gen := l.tail.generation()
	seq, duplicate, err := l.request(ctx, subject, expected, msgID, data)
	if err != nil {
		return 0, appendError(subject, expected, err)
	}
	if duplicate {
		// The same command id was already appended within the dedupe window:
		// the earlier append stands and is the answer.
		return seq, nil
	}
	l.keep(gen, seq, subject, msgID, expected, data)
	return seq, nil
}

// appendError is what an append whose request failed with err answers:
// ErrConcurrency when the stream refused it for its expected sequence,
// ErrLogUnavailable when it was never sent, the stream's refusal as it is
// when the stream refused it for itself, and ErrOutcomeUnknown for
// everything that leaves open whether it was stored.
func appendError(subject string, expected uint64, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10071, 10164:
			return fmt.Errorf("append %s at %d: %w", subject, expected, ErrConcurrency)
		case 10158:
			// "duplicate message id is in process": a message with this
			// commit's id (an earlier send of it, a batch that carried it)
			// is being stored, and this commit's outcome is that one's:
			// answered as refused, the caller would be told nothing was
			// recorded of a commit that may be.
			return fmt.Errorf("append %s: %v: %w", subject, err, ErrOutcomeUnknown)
		}
		return fmt.Errorf("append %s: %w", subject, err)
	}
	if errors.Is(err, nats.ErrReconnectBufExceeded) || errors.Is(err, nats.ErrConnectionReconnecting) {
		return fmt.Errorf("append %s: %v: %w", subject, err, ErrLogUnavailable) // not sent: no reconnect buffer
	}
	return fmt.Errorf("append %s: %v: %w", subject, err, ErrOutcomeUnknown) // a timeout, a lost connection, no stream answering: sent or not
}

// Msg is one commit as read from the log.
type Msg struct {
	Subject string
	Seq     uint64
	ID      string // the commit's id (Nats-Msg-Id)
	Data    []byte
	// Prev is the subject's sequence the commit was appended after (its
	// Nats-Expected-Last-Subject-Sequence); HasPrev is false where the
	// message does not say.
	Prev    uint64
	HasPrev bool
}

// LastSeq is the stream's last sequence (0 when empty).
func (l *Log) LastSeq(ctx context.Context) (uint64, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("eventlog: stream info: %w", l.readErr(err))
	}
	return info.State.LastSeq, nil
}

// directGetWait bounds how long a read of a subject's last message waits for
// the stream's replicas to answer direct gets (lastMsg).
const directGetWait = 10 * time.Second

// lastMsg is the last message on a physical subject. The stream allows
// direct gets, which its replicas answer through subscriptions of their own:
// a replicated stream just created (one engine of a new cluster creates it,
// another reads its identity a moment later) or whose replicas are all
// restarting has none yet, and the request meets "no responders". That is
// retried for up to directGetWait, never turned into "no message".
func (l *Log) lastMsg(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return retryNoResponders(ctx, directGetWait, func() (*jetstream.RawStreamMsg, error) {
		return l.stream.GetLastMsgForSubject(ctx, subject)
	})
}

// readErr marks err, a direct read's failure, as ErrLogUnavailable as
// well when the log could not be reached (the connection down or
// reconnecting, no server to answer): nothing was read, and a command that
// needed the read answers log_unavailable, safe to retry, instead of
// failing on its own account (a fail-closed 503 holds_unreadable).
func (l *Log) readErr(err error) error {
	if err == nil || errors.Is(err, ErrLogUnavailable) {
		return err
	}
	if !l.nc.IsConnected() || errors.Is(err, nats.ErrReconnectBufExceeded) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%w: %w", err, ErrLogUnavailable)
	}
	return err
}

// retryNoResponders calls get until it answers other than nats.ErrNoResponders,
// wait has passed or ctx ends, 50 ms apart.
func retryNoResponders[T any](ctx context.Context, wait time.Duration, get func() (T, error)) (T, error) {
	deadline := time.Now().Add(wait)
	for {
		v, err := get()
		if !errors.Is(err, nats.ErrNoResponders) || !time.Now().Before(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// LastSubjectSeq is the sequence of the last commit on subject (0 when none).
func (l *Log) LastSubjectSeq(ctx context.Context, subject string) (uint64, error) {
	m, err := l.lastMsg(ctx, l.phys(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("eventlog: last of %s: %w", subject, l.readErr(err))
	}
	return m.Sequence, nil
}

// Last is the last commit on subject; false when there is none.
func (l *Log) Last(ctx context.Context, subject string) (Msg, bool, error) {
	m, err := l.lastMsg(ctx, l.phys(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Msg{}, false, nil
	}
	if err != nil {
		return Msg{}, false, fmt.Errorf("eventlog: last of %s: %w", subject, l.readErr(err))
	}
	return Msg{Subject: subject, Seq: m.Sequence, ID: m.Header.Get(jetstream.MsgIDHeader), Data: m.Data}, true, nil
}

// At is the commit at a sequence of the stream (a direct get: a replica
// may answer). ErrMsgNotFound (wrapped) when there is none.
func (l *Log) At(ctx context.Context, seq uint64) (Msg, error) {
	m, err := retryNoResponders(ctx, directGetWait, func() (*jetstream.RawStreamMsg, error) {
		return l.stream.GetMsg(ctx, seq)
	})
	if err != nil {
		return Msg{}, fmt.Errorf("eventlog: commit %d: %w", seq, l.readErr(err))
	}
	return Msg{Subject: l.logical(m.Subject), Seq: m.Sequence, ID: m.Header.Get(jetstream.MsgIDHeader), Data: m.Data}, nil
}

// Load calls fn for every commit on subject in order, up to the subject's last
// sequence as of the call; it returns that sequence (0: none).
func (l *Log) Load(ctx context.Context, subject string, fn func(Msg) error) (uint64, error) {
	last, err := l.LastSubjectSeq(ctx, subject)
	if err != nil || last == 0 {
		return 0, err
	}
	err = l.follow(ctx, []string{l.phys(subject)}, 0, last, fn)
	return last, err
}

// Replay calls fn for every commit after sequence from, in stream order, up to
// the stream's last sequence as of the call, and returns that sequence.
func (l *Log) Replay(ctx context.Context, from uint64, fn func(Msg) error) (uint64, error) {
	last, err := l.LastSeq(ctx)
	if err != nil || last <= from {
		return from, err
	}
	return last, l.follow(ctx, nil, from, last, fn)
}

// First is the first commit on subject (a direct get: a replica may
// answer); false when there is none.
func (l *Log) First(ctx context.Context, subject string) (Msg, bool, error) {
	m, err := retryNoResponders(ctx, directGetWait, func() (*jetstream.RawStreamMsg, error) {
		return l.stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(l.phys(subject)))
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Msg{}, false, nil
	}
	if err != nil {
		return Msg{}, false, fmt.Errorf("eventlog: first of %s: %w", subject, l.readErr(err))
	}
	return Msg{Subject: subject, Seq: m.Sequence, ID: m.Header.Get(jetstream.MsgIDHeader), Data: m.Data}, true, nil
}

// errPast ends a ReplaySubjects read at the first commit past its end.
var errPast = errors.New("eventlog: past the end of the read")

// ReplaySubjects calls fn, in stream order, for every commit at or below
// sequence until on a subject one of filters matches (logical subjects,
// wildcards allowed). The stream's other commits are never sent.
func (l *Log) ReplaySubjects(ctx context.Context, filters []string, until uint64, fn func(Msg) error) error {
	// The read ends at the last matching commit at or below until, or at
	// the first one past it: a filtered consumer does not see the stream's
	// head, so the end must be a commit it will deliver.
	var stop uint64
	phys := make([]string, len(filters))
	for i, f := range filters {
		phys[i] = l.phys(f)
		m, err := l.lastMsg(ctx, phys[i])
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("eventlog: last of %s: %w", f, err)
		}
		stop = max(stop, m.Sequence)
	}
	stop = min(stop, until)
	if stop == 0 {
		return nil
	}
	err := l.follow(ctx, phys, 0, stop, func(m Msg) error {
		if m.Seq > stop {
			return errPast
		}
		return fn(m)
	})
	if errors.Is(err, errPast) {
		return nil
	}
	return err
}

// Follow calls fn for every commit after sequence from, in stream order, until
// ctx ends or fn fails. It never returns nil before ctx ends.
func (l *Log) Follow(ctx context.Context, from uint64, fn func(Msg) error) error {
	return l.follow(ctx, nil, from, 0, fn)
}

func (l *Log) follow(ctx context.Context, filter []string, from, until uint64, fn func(Msg) error) error {
	slot := until > 0 // a read to an end waits for a slot (maxReads)
	if slot {
		select {
		case l.reads <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: filter, DeliverPolicy: jetstream.DeliverAllPolicy,
		InactiveThreshold: readerIdle}
	if from > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = from + 1
	}
	cons, err := l.stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		if slot {
			<-l.reads
		}
		return fmt.Errorf("eventlog: consumer: %w", err)
	}
	// Consume hands each message to the handler on the subscription's own
	// goroutine: no iterator in between, which makes a cold start's read
	// about a tenth cheaper than Messages. The ordered consumer recreates
	// itself after a gap or a missed heartbeat, and delivers in order. As
	// with an iterator, fn is never running once follow has returned: the
	// handler holds mu while it calls fn, and follow takes mu to end.
	var (
		mu      sync.Mutex
		ended   bool  // no more calls of fn
		outcome error // why the handler ended, when it did
		done    = make(chan struct{})
		seen    = from // the last sequence delivered
		at      = time.Now()
	)
	end := func(err error) { // mu is held
		ended, outcome = true, err
		close(done)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		md, err := m.Metadata()
		if err != nil {
			end(fmt.Errorf("eventlog: metadata: %w", err))
			return
		}
		seq := md.Sequence.Stream
		seen, at = seq, time.Now()
		h := m.Headers()
		msg := Msg{Subject: l.logical(m.Subject()), Seq: seq, ID: h.Get(jetstream.MsgIDHeader), Data: m.Data()}
		if v := h.Get(jetstream.ExpectedLastSubjSeqHeader); v != "" {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil {
				msg.Prev, msg.HasPrev = n, true
			}
		}
		if err := fn(msg); err != nil {
			end(err)
			return
		}
		if until > 0 && seq >= until {
			end(nil)
		}
	}, jetstream.PullMaxMessages(4096))
	defer l.dropReader(cons, slot) // after Consume failed too: it may have made the consumer
	if err != nil {
		return fmt.Errorf("eventlog: consume: %w", err)
	}
	defer cc.Stop()
	stalled := make(chan struct{})
	if len(filter) == 0 { // a whole-stream read: the stream's head tells what is left to deliver
		go l.watchStall(ctx, done, stalled, &mu, &seen, &at)
	}
	select {
	case <-done:
	case <-cc.Closed():
	case <-ctx.Done():
	case <-stalled:
		mu.Lock()
		if !ended {
			end(fmt.Errorf("%w: nothing delivered for %v while the stream holds more", ErrStalled, StallAfter))
		}
		mu.Unlock()
	}
	mu.Lock() // waits for a call of fn in progress
	byHandler := ended
	ended = true
	mu.Unlock()
	switch {
	case byHandler:
		return outcome
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return errors.New("eventlog: the log's consumer stopped (connection closed)")
}

// readerIdle is how long the server keeps a read's consumer that nobody pulls
// from. A read deletes its consumer when it ends (dropReader); this bounds
// those it could not delete (a crash, a lost connection). nats.go's own
// default is 5 minutes, and nats-server allows 1,000 consumers a stream by
// default: a node loading aggregates after a restart makes one a load, and
// a few restarts within 5 minutes reached the limit, refusing every read.
const readerIdle = 30 * time.Second

// maxReads bounds the reads to an end (Load, Replay, ReplaySubjects) in
// flight, each with a consumer on the server; more wait for a slot. A burst
// of aggregates loading at once (a takeover, a restart under load) would
// otherwise pass the server's 1,000 consumers a stream and be refused; at
// 128 a node, seven nodes' bursts stay under it.
const maxReads = 128

// dropReader deletes the server's consumer of an ended read off the read's
// path (a read that ended waits for no round trip), then frees the read's
// slot, if it held one: the consumers on the server are no more than the
// slots, even when reads end faster than their consumers are deleted.
func (l *Log) dropReader(cons jetstream.Consumer, slot bool) {
	var name string
	if info := cons.CachedInfo(); info != nil {
		name = info.Name
	}
	go func() {
		if slot {
			defer func() { <-l.reads }()
		}
		if name == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.js.DeleteConsumer(ctx, l.name, name)
	}()
}

// DuplicateWindow is how long the stream remembers a commit's message id
// to refuse it again (JetStream's duplicate window). A server that starts
// loads the ids of the commits written that recently, whatever the log's
// length.
const DuplicateWindow = 2 * time.Minute

// ErrStalled ends a read of the log whose consumer delivered nothing for
// StallAfter while the stream held commits past the last one delivered
// (after every NATS server restarted, a consumer may never resume): the
// caller reads again from where it was.
var ErrStalled = errors.New("eventlog: the log's consumer stalled")

// StallAfter is how long a consumer may deliver nothing while the stream
// holds more before its read ends with ErrStalled.
var StallAfter = 5 * time.Second

// watchStall closes stalled when the read delivered nothing for StallAfter
// while the stream's last sequence is past what it delivered.
func (l *Log) watchStall(ctx context.Context, done <-chan struct{}, stalled chan<- struct{}, mu *sync.Mutex, seen *uint64, at *time.Time) {
	t := time.NewTicker(StallAfter / 5)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-t.C:
		}
		mu.Lock()
		last, idle := *seen, time.Since(*at)
		mu.Unlock()
		if idle < StallAfter {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		head, err := l.LastSeq(sctx)
		cancel()
		if err == nil && head > last {
			close(stalled)
			return
		}
	}
}

// FollowCommits is Follow in the shape projections.Source asks for.
// A log that keeps a tail (Config.SoleWriter) hands out its own commits
// from it.
func (l *Log) FollowCommits(ctx context.Context, from uint64, fn func(subject string, seq uint64, id string, data []byte) error) error {
	each := func(m Msg) error { return fn(m.Subject, m.Seq, m.ID, m.Data) }
	if l.tail != nil {
		return l.followTail(ctx, from, each)
	}
	return l.Follow(ctx, from, each)
}
