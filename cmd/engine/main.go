// Command engine is the trading engine service, and its operations on the
// commit log and the read models: engine log, engine backup -o FILE, engine
// restore -i FILE, engine rebuild-read-models, engine admin (each with -h).
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/svc/engine/cmd/engine/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv); err != nil {
		slog.Error("exit", "err", err)
		os.Exit(1)
	}
}

// command is a subcommand: engine <name> [flags].
type command func(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error

func run(ctx context.Context, args []string, getenv func(string) string) error {
	if len(args) > 0 {
		commands := map[string]command{
			"log":                 app.DumpLog,           // the commit log as JSON lines
			"backup":              app.Backup,            // engine backup -o FILE
			"restore":             app.Restore,           // engine restore -i FILE
			"rebuild-read-models": app.RebuildReadModels, // empty the PostgreSQL read models
			"admin":               app.Admin,             // users, operators and keys for a production engine
		}
		if cmd, ok := commands[args[0]]; ok {
			err := cmd(ctx, args[1:], getenv, os.Stdout, os.Stderr)
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		}
	}
	cfg, err := app.ParseConfig(args, getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	return app.Run(ctx, cfg, app.Options{})
}
