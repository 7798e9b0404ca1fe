package app

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/svc/engine/engine/eventlog"
)

// logFlags select the log a command reads or writes, from the environment
// the engine runs with.
type logFlags struct {
	dataDir, natsURL, stream, deployment string
	replicas                             int
}

func addLogFlags(fs *flag.FlagSet, getenv func(string) string) *logFlags {
	env := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	var f logFlags
	fs.StringVar(&f.dataDir, "data-dir", env("ENGINE_DATA_DIR", "./data"), "data directory of the embedded JetStream (ENGINE_DATA_DIR)")
	fs.StringVar(&f.natsURL, "nats-url", env("NATS_URL", ""), "external NATS server or cluster; empty: embedded (NATS_URL)")
	fs.StringVar(&f.stream, "stream", env("ENGINE_STREAM", ""), "name of the commit stream; empty: derived from ENGINE_DEPLOYMENT, EVT by default (ENGINE_STREAM)")
	fs.StringVar(&f.deployment, "deployment", env("ENGINE_DEPLOYMENT", ""), "the deployment whose log to read (ENGINE_DEPLOYMENT)")
	return &f
}

// names is the deployment the flags name: its commit stream and subject prefix.
func (f *logFlags) names() Deployment { return Deployment{Name: f.deployment, Stream: f.stream} }

// where names the log for an operator.
func (f *logFlags) where() string { return logWhere(f.natsURL, f.dataDir, f.names().CommitStream()) }

// existing checks that an embedded log is there to read: a reader never
// starts a new, empty log where none is.
func (f *logFlags) existing(cmd string) error {
	if f.natsURL != "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(f.dataDir, "nats")); err != nil {
		return fmt.Errorf("%s: no embedded log under %s (set -data-dir or ENGINE_DATA_DIR, or NATS_URL): %w", cmd, f.dataDir, err)
	}
	return nil
}

// Backup is `engine backup -o FILE`: a backup of the commit log, made by
// JetStream's stream snapshot, written to FILE through a temporary file that
// replaces it only once whole and checked. On the embedded log the engine
// must be stopped (the data directory's lock refuses the backup otherwise);
// on NATS_URL it may run, and the backup holds the stream as of its start.
func Backup(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("engine backup", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: engine backup -o FILE [flags]")
		fmt.Fprintln(errOut, "Writes a backup of the commit log (a JetStream stream snapshot) to FILE. On the embedded log, stop the engine first.")
		fs.PrintDefaults()
	}
	lf := addLogFlags(fs, getenv)
	file := fs.String("o", "", "the backup file to write (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		fs.Usage()
		return errors.New("engine backup: -o FILE is required")
	}
	if err := lf.existing("engine backup"); err != nil {
		return err
	}
	l, err := eventlog.Open(ctx, eventlog.Config{URL: lf.natsURL, DataDir: lf.dataDir, Sync: "always", Stream: lf.names().CommitStream(), Prefix: lf.names().CommitPrefix(), Replicas: 1, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("engine backup: %w", err)
	}
	defer l.Close()
	tmp, err := os.CreateTemp(filepath.Dir(*file), "."+filepath.Base(*file)+".*.partial")
	if err != nil {
		return fmt.Errorf("engine backup: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 1<<20)
	info, err := l.Backup(ctx, w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err != nil {
		return fmt.Errorf("engine backup: %w", err)
	}
	st, err := tmp.Stat()
	if err != nil {
		return err
	}
	if _, err := eventlog.ReadBackup(tmp, st.Size()); err != nil {
		return fmt.Errorf("engine backup: the written file does not check: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), *file); err != nil {
		return fmt.Errorf("engine backup: %w", err)
	}
	done = true
	syncDir(filepath.Dir(*file))
	logID := info.LogID
	if logID == "" {
		logID = "none (a log from before logs had ids)"
	}
	fmt.Fprintf(out, "backed up %s: log %s, %d messages, sequences %d to %d, to %s (%d bytes)\n",
		lf.where(), logID, info.Msgs, info.FirstSeq, info.LastSeq, *file, st.Size())
	return nil
}

// Restore is `engine restore -i FILE`: it restores a backup made by engine
// backup into the log the engine is configured with, through JetStream's
// stream restore. The target must hold no commits: a new ENGINE_DATA_DIR (the
// engine stopped: the lock refuses the restore otherwise), or a NATS_URL
// without the stream. The restored log keeps the backed-up log's id.
func Restore(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("engine restore", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: engine restore -i FILE [flags]")
		fmt.Fprintln(errOut, "Restores a backup made by engine backup into an empty log (a new ENGINE_DATA_DIR, or NATS_URL without the stream). Stop the engine first.")
		fs.PrintDefaults()
	}
	lf := addLogFlags(fs, getenv)
	rep, err := strconv.Atoi(getenv("ENGINE_STREAM_REPLICAS"))
	if err != nil {
		rep = 1
	}
	replicas := fs.Int("stream-replicas", rep, "replicas of the restored stream on a cluster (ENGINE_STREAM_REPLICAS)")
	file := fs.String("i", "", "the backup file to restore (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		fs.Usage()
		return errors.New("engine restore: -i FILE is required")
	}
	f, err := os.Open(*file)
	if err != nil {
		return fmt.Errorf("engine restore: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	b, err := eventlog.ReadBackup(f, st.Size())
	if err != nil {
		return fmt.Errorf("engine restore: %s: %w", *file, err)
	}
	if b.Stream != lf.names().CommitStream() {
		return fmt.Errorf("engine restore: %s holds stream %s, and the engine is set to stream %s: restore with ENGINE_STREAM=%s (or -stream %s), and run the engine with it", *file, b.Stream, lf.names().CommitStream(), b.Stream, b.Stream)
	}
	info, err := eventlog.Restore(ctx, eventlog.Config{URL: lf.natsURL, DataDir: lf.dataDir, Sync: "always", Stream: lf.names().CommitStream(), Prefix: lf.names().CommitPrefix(), Replicas: *replicas}, f, st.Size())
	if errors.Is(err, eventlog.ErrRestoreRefused) {
		return fmt.Errorf("engine restore: %w. Restore into a new ENGINE_DATA_DIR, or, on NATS_URL, remove the stream first if you are sure it may go", err)
	}
	if err != nil {
		return fmt.Errorf("engine restore: %w", err)
	}
	logID := info.LogID
	if logID == "" {
		logID = "none (a log from before logs had ids; the next start gives it one)"
	}
	fmt.Fprintf(out, "restored %s from %s: log %s, %d messages, up to sequence %d\n", lf.where(), *file, logID, info.Msgs, info.LastSeq)
	fmt.Fprintf(out, "read models: memory ones are rebuilt at every start. PostgreSQL ones of this log are served only if they are not past sequence %d; the engine refuses them at start otherwise (a backup older than the read models): then run `engine rebuild-read-models` with the same DATABASE_URL and start again.\n", info.LastSeq)
	return nil
}

// syncDir makes a rename in dir durable, where the system allows.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
