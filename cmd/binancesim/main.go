// Command binancesim runs the Binance USDⓈ-M Futures simulator (package sim/binance) standalone:
//
//	go run ./cmd/binancesim -addr 127.0.0.1:8090
//
// It prints the REST and stream base URLs and a demo account's API key and secret, then serves
// until interrupted. The control API under /_sim/ drives prices, accounts and faults; see
// docs/binance-simulator.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/svc/engine/sim/binance"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		slog.Error("exit", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("binancesim", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	key := fs.String("key", "demo-api-key", "API key of the demo account")
	secret := fs.String("secret", "demo-api-secret", "secret of the demo account")
	usdt := fs.String("usdt", "10000", "USDT wallet balance of the demo account")
	ttl := fs.Duration("listen-key-ttl", 60*time.Minute, "a listen key expires this long after its last keepalive")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *key == "" || *secret == "" {
		return errors.New("-key and -secret must not be empty")
	}
	sim := binance.New(binance.Options{ListenKeyTTL: *ttl, Logger: slog.Default()})
	if err := sim.AddAccount(binance.Account{APIKey: *key, Secret: *secret, Balances: map[string]string{"USDT": *usdt}}); err != nil {
		return err
	}
	if err := sim.Start(*addr); err != nil {
		return err
	}
	fmt.Fprintf(out, "REST base:   %s\n", sim.URL())
	fmt.Fprintf(out, "stream base: %s  (user stream %s/ws/<listenKey>, combined %s/stream?streams=a/b)\n", sim.WSURL(), sim.WSURL(), sim.WSURL())
	fmt.Fprintf(out, "control:     %s/_sim/\n", sim.URL())
	fmt.Fprintf(out, "demo API key: %s\ndemo secret:  %s\n", *key, *secret)
	<-ctx.Done()
	return sim.Close()
}
