package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"

	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/postgres"
)

// ErrReadModelsOfAnotherLog means the read models were folded from another
// commit log than the one the engine opened (for example: the same
// DATABASE_URL with a new ENGINE_DATA_DIR).
var ErrReadModelsOfAnotherLog = errors.New("the read models belong to another commit log")

// ErrReadModelsAhead means the read models' checkpoint is past the log's last
// commit: the log lost commits they hold (a restore of an older backup), or
// it is another log that the store, bound to none, cannot tell apart.
var ErrReadModelsAhead = errors.New("the read models are ahead of the commit log")

// ReadModelsError is the refusal of the read models at start: Err is
// ErrReadModelsOfAnotherLog or ErrReadModelsAhead.
type ReadModelsError struct {
	Err        error
	Store      string // where the read models are, as the operator set it
	Log        string // where the log is, as the operator set it
	LogID      string // the log's id
	StoreLogID string // the id of the log the store is bound to ("": none)
	Checkpoint uint64 // the read models' last sequence
	LastSeq    uint64 // the log's last sequence
}

func (e *ReadModelsError) Unwrap() error { return e.Err }

func (e *ReadModelsError) Error() string {
	var what string
	if errors.Is(e.Err, ErrReadModelsOfAnotherLog) {
		what = fmt.Sprintf("The read models in %s were folded from log %s, up to sequence %d; the log is %s (%s), which ends at sequence %d.",
			e.Store, e.StoreLogID, e.Checkpoint, e.LogID, e.Log, e.LastSeq)
	} else {
		what = fmt.Sprintf("The read models in %s are folded up to sequence %d, but log %s (%s) ends at sequence %d: it lost commits they hold (a restore of an older backup?), or it is not their log.",
			e.Store, e.Checkpoint, e.LogID, e.Log, e.LastSeq)
	}
	return fmt.Sprintf("refusing to start: %v. %s Either point DATABASE_URL, NATS_URL and ENGINE_DATA_DIR at a log and read models that belong together, or empty the read models with `engine rebuild-read-models` (same DATABASE_URL) and start again: the start replays this log into them.",
		e.Err, what)
}

// bindReadModels checks, before anything reads them, that the read models
// belong to the log: a store bound to another log, or whose checkpoint is past
// the log's last commit, is refused with a *ReadModelsError, since serving it
// would answer with another log's keys, accounts and orders. A store bound to
// no log (a new one, or one from before logs had ids) binds to this one.
func bindReadModels(ctx context.Context, cfg Config, l *eventlog.Log, s projections.Store) error {
	refuse := func(err error, bound string, cp, last uint64) error {
		return &ReadModelsError{Err: err, Store: storeWhere(cfg.DatabaseURL), Log: logWhere(cfg.NatsURL, cfg.DataDir, l.StreamName()),
			LogID: l.ID(), StoreLogID: bound, Checkpoint: cp, LastSeq: last}
	}
	bound, err := s.LogID(ctx)
	if err != nil {
		return err
	}
	cp, err := s.Checkpoint(ctx)
	if err != nil {
		return err
	}
	last, err := l.LastSeq(ctx)
	if err != nil {
		return err
	}
	if bound != "" && bound != l.ID() {
		return refuse(ErrReadModelsOfAnotherLog, bound, cp, last)
	}
	if cp > last {
		return refuse(ErrReadModelsAhead, bound, cp, last)
	}
	if bound != "" {
		return nil
	}
	if bound, err = s.Bind(ctx, l.ID()); err != nil {
		return err
	}
	if bound != l.ID() { // another node bound it meanwhile, to another log
		return refuse(ErrReadModelsOfAnotherLog, bound, cp, last)
	}
	slog.Info("read models bound to the log", "log", l.ID(), "store", storeName(cfg.DatabaseURL), "checkpoint", cp)
	return nil
}

// RebuildReadModels is `engine rebuild-read-models`: it empties the
// PostgreSQL read models of DATABASE_URL (documents, checkpoint and log
// binding) so that the next start replays the log it meets into them. The
// engine must be stopped meanwhile. The memory read models need no rebuild:
// every start makes them anew.
func RebuildReadModels(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("engine rebuild-read-models", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: engine rebuild-read-models [flags]")
		fmt.Fprintln(errOut, "Empties the PostgreSQL read models (documents, checkpoint, log binding); the next start replays the commit log into them. Stop the engine first.")
		fs.PrintDefaults()
	}
	dbURL := fs.String("database-url", getenv("DATABASE_URL"), "PostgreSQL of the read models (DATABASE_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dbURL == "" {
		return errors.New("engine rebuild-read-models: no DATABASE_URL: the read models are in memory, and every start rebuilds them")
	}
	s, err := postgres.Open(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("engine rebuild-read-models: %w", err)
	}
	defer s.Close()
	was, err := s.LogID(ctx)
	if err != nil {
		return err
	}
	cp, err := s.Checkpoint(ctx)
	if err != nil {
		return err
	}
	n, err := s.Reset(ctx)
	if err != nil {
		return fmt.Errorf("engine rebuild-read-models: %w", err)
	}
	if was == "" {
		was = "none"
	}
	fmt.Fprintf(out, "emptied the read models in %s: %d documents up to sequence %d of log %s; the next engine start replays its commit log into them\n",
		storeWhere(*dbURL), n, cp, was)
	return nil
}

// storeWhere names the read models' store for an operator, without secrets.
func storeWhere(dbURL string) string {
	if dbURL == "" {
		return "memory"
	}
	return "PostgreSQL (DATABASE_URL=" + redact(dbURL, "search_path") + ")"
}

// logWhere names the log for an operator, without secrets.
func logWhere(natsURL, dataDir, stream string) string {
	if natsURL != "" {
		return "stream " + stream + " on NATS_URL=" + redact(natsURL)
	}
	return "stream " + stream + " embedded in ENGINE_DATA_DIR=" + dataDir
}

// redact is a URL without its user, password and query parameters but keep;
// a string that is not a URL (a key=value connection string) is not shown.
func redact(raw string, keep ...string) string {
	var out []string
	for _, one := range strings.Split(raw, ",") { // NATS_URL may list servers
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil || u.Host == "" {
			return "(set)"
		}
		q := url.Values{}
		for _, k := range keep {
			if v := u.Query().Get(k); v != "" {
				q.Set(k, v)
			}
		}
		u.User, u.RawQuery, u.Fragment = nil, q.Encode(), ""
		out = append(out, u.String())
	}
	return strings.Join(out, ",")
}
