package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/svc/engine/cmd/engine/app"
)

// The restart phase (issue 22: ready in at most 5 s after a restart over a
// log of 1,000,000 commits with PostgreSQL read models). On a copy of the
// cold-start log, one preparing start brings PostgreSQL read models (a fresh
// schema) to the log's end and, at its clean stop, snapshots every account;
// then restarts in fresh processes, alternating, time app.Start up to
// Ready() (what /readyz answers 200 on) with snapshots on and off.

// restartResult is one pair of timed restarts.
type restartResult struct {
	Commits  uint64
	Full     time.Duration // ENGINE_SNAPSHOTS=off: the aggregates replay the whole log
	Snapshot time.Duration // ENGINE_SNAPSHOTS=on: seeded from snapshots, the log replayed after their mark
	Prepare  time.Duration
}

func restartPhase(ctx context.Context, o opts, runs int, progress func(string)) ([]restartResult, error) {
	if o.databaseURL == "" {
		return nil, errors.New("the restart phase needs -database-url (or DATABASE_URL)")
	}
	src, last, err := coldLog(ctx, o, progress)
	if err != nil {
		return nil, err
	}
	if o.coldLog == "" {
		defer os.RemoveAll(src)
	}
	dir, err := os.MkdirTemp(o.tmp, "bench-restart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// A copy: the service's first start adds the sandbox's demo tenant to the log it runs on.
	if out, err := exec.CommandContext(ctx, "cp", "-a", filepath.Join(src, "nats"), dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copy the cold-start log: %v: %s", err, out)
	}
	dbURL, drop, err := pgSchema(ctx, o.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("a schema for the read models: %w", err)
	}
	defer drop()
	progress(fmt.Sprintf("restart: preparing: PostgreSQL read models of %d commits and snapshots of every account (one start and its stop)", last))
	var prep time.Duration
	for attempt := 0; ; attempt++ {
		// A start gives the read models at most 5 minutes to catch up; the next goes on from their checkpoint.
		d, err := restartProcess(ctx, dir, dbURL, "on", "-prepare")
		prep += d
		if err == nil {
			break
		}
		if attempt == 3 {
			return nil, fmt.Errorf("preparing start: %w", err)
		}
		progress(fmt.Sprintf("restart: preparing start %d: %v; again", attempt+1, err))
	}
	progress(fmt.Sprintf("restart: prepared in %s", prep.Round(time.Millisecond)))
	var out []restartResult
	for i := range runs {
		var prof []string // with -cpuprofile: each start's profile
		if o.profile != "" {
			prof = []string{"-cpuprofile", filepath.Join(o.profile, fmt.Sprintf("restart-%d-off.pprof", i))}
		}
		r := restartResult{Commits: last, Prepare: prep}
		if r.Full, err = restartProcess(ctx, dir, dbURL, "off", prof...); err != nil {
			return out, fmt.Errorf("restart without snapshots: %w", err)
		}
		if prof != nil {
			prof[1] = filepath.Join(o.profile, fmt.Sprintf("restart-%d-on.pprof", i))
		}
		if r.Snapshot, err = restartProcess(ctx, dir, dbURL, "on", prof...); err != nil {
			return out, fmt.Errorf("restart with snapshots: %w", err)
		}
		progress(fmt.Sprintf("restart to ready, PostgreSQL read models at their checkpoint: without snapshots %s, with snapshots %s",
			r.Full.Round(time.Millisecond), r.Snapshot.Round(time.Millisecond)))
		out = append(out, r)
	}
	return out, nil
}

// restartProcess runs one timed start in a child process (this binary's
// restart-once subcommand) and reads back its time.
func restartProcess(ctx context.Context, dir, dbURL, snapshots string, more ...string) (time.Duration, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	t := time.Now()
	cmd := exec.CommandContext(ctx, exe, append([]string{"restart-once", "-dir", dir, "-database-url", dbURL, "-snapshots", snapshots}, more...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return time.Since(t), err
	}
	var res struct {
		Nanos int64 `json:"nanos"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("restart-once answered %q: %w", out, err)
	}
	return time.Duration(res.Nanos), nil
}

// restartOnce is the restart-once subcommand: the service started as
// cmd/engine starts it on -dir, timed from app.Start's call until Ready()
// (what /readyz answers 200 on), then stopped cleanly; printed as JSON.
// With -prepare it snapshots every aggregate before it stops, unbounded.
func restartOnce(args []string) error {
	fs := flag.NewFlagSet("restart-once", flag.ContinueOnError)
	dir := fs.String("dir", "", "data directory of the log")
	db := fs.String("database-url", "", "PostgreSQL of the read models")
	snapshots := fs.String("snapshots", "on", "ENGINE_SNAPSHOTS")
	prepare := fs.Bool("prepare", false, "snapshot every aggregate before the stop")
	profile := fs.String("cpuprofile", "", "CPU profile of the start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *profile != "" {
		stop, err := cpuProfile(*profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	env := map[string]string{"ENGINE_DATA_DIR": *dir, "DATABASE_URL": *db, "ENGINE_SNAPSHOTS": *snapshots, "ENGINE_LOG_LEVEL": "warn"}
	ctx := context.Background()
	a, took, err := startReady(ctx, env)
	if err != nil {
		return err
	}
	if *prepare {
		n, err := a.Engine.SnapshotRound(ctx, -1)
		fmt.Fprintf(os.Stderr, "restart-once: %d snapshots written\n", n)
		if err != nil {
			a.Close()
			return err
		}
	}
	a.Close()
	return json.NewEncoder(os.Stdout).Encode(map[string]int64{"nanos": int64(took)})
}

// startReady starts the service in this process on the settings env and
// waits until it is ready (what /readyz answers 200 on): the app and the
// time from start to ready.
func startReady(ctx context.Context, env map[string]string) (*app.App, time.Duration, error) {
	cfg, err := app.ParseConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		return nil, 0, err
	}
	t := time.Now()
	a, err := app.Start(ctx, cfg, app.Options{ManualFeed: true})
	if err != nil {
		return nil, 0, err
	}
	for {
		if ok, _ := a.Ready(); ok {
			return a, time.Since(t), nil
		}
		if time.Since(t) > 10*time.Minute {
			a.Close()
			return nil, 0, errors.New("not ready after 10 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
