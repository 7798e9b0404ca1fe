// Command tradovatesim runs the Tradovate API simulator (package sim/tradovate) standalone:
//
//	go run ./cmd/tradovatesim -addr 127.0.0.1:8091
//
// It seeds three logins — a demo login (no market data), a live login with a market data
// subscription for -live-md products, and a live login without one — prints the REST base, the two
// socket URLs, the control API and the logins' names and accounts (never their passwords), then
// serves until interrupted. The control API under /_sim/ drives prices, logins, rolls and faults;
// see docs/tradovate-simulator.md.
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
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/svc/engine/sim/tradovate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Getenv); err != nil {
		slog.Error("exit", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("tradovatesim", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8091", "listen address")
	demoUser := fs.String("demo-user", "demo-trader", "name of the demo login (no market data)")
	liveUser := fs.String("live-user", "live-trader", "name of the live login with a market data subscription")
	liveMD := fs.String("live-md", "ES,NQ,ZN", "products the live login's market data subscription covers")
	plainUser := fs.String("live-nomd-user", "live-nomd-trader", "name of the live login without market data")
	balance := fs.String("balance", "50000", "starting cash balance of every seeded account")
	prices := fs.String("prices", "", `starting prices, "ES=5000.25,ZN=110.5" (a product name sets its month to trade now; or name a month, ESZ6)`)
	lifetime := fs.Duration("token-lifetime", 90*time.Minute, "access token lifetime")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Passwords come from the environment so they never sit in a shell history or a process list.
	password := getenv("TRADOVATESIM_PASSWORD")
	if password == "" {
		password = "sim-password"
	}
	sim, err := tradovate.New(tradovate.Options{TokenLifetime: *lifetime, Logger: slog.Default()})
	if err != nil {
		return err
	}
	var md []string
	for _, p := range strings.Split(*liveMD, ",") {
		if p = strings.TrimSpace(p); p != "" {
			md = append(md, p)
		}
	}
	logins := []tradovate.Login{
		{Name: *demoUser, Password: password, Kind: "demo", Accounts: []tradovate.AccountSpec{{Balance: *balance}}},
		{Name: *liveUser, Password: password, Kind: "live", MarketData: md, Accounts: []tradovate.AccountSpec{{Balance: *balance}}},
		{Name: *plainUser, Password: password, Kind: "live", Accounts: []tradovate.AccountSpec{{Balance: *balance}}},
	}
	type seeded struct {
		login    tradovate.Login
		accounts map[string]int64
	}
	var done []seeded
	for _, l := range logins {
		_, accounts, err := sim.AddLogin(l)
		if err != nil {
			return err
		}
		done = append(done, seeded{l, accounts})
	}
	if *prices != "" {
		for _, kv := range strings.Split(*prices, ",") {
			sym, px, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return fmt.Errorf("-prices: %q is not SYMBOL=PRICE", kv)
			}
			if err := sim.SetPrice(sym, px); err != nil {
				return err
			}
		}
	}
	if err := sim.Start(*addr); err != nil {
		return err
	}
	fmt.Fprintf(out, "REST base:          %s\n", sim.URL())
	fmt.Fprintf(out, "user data socket:   %s\n", sim.WSURL())
	fmt.Fprintf(out, "market data socket: %s\n", sim.MDURL())
	fmt.Fprintf(out, "control:            %s/\n", sim.ControlURL())
	for _, d := range done {
		names := make([]string, 0, len(d.accounts))
		for n := range d.accounts {
			names = append(names, n)
		}
		sort.Strings(names)
		what := d.login.Kind
		if d.login.Kind == "live" {
			what = "live, no market data"
			if len(d.login.MarketData) > 0 {
				what = "live, market data " + strings.Join(d.login.MarketData, " ")
			}
		}
		fmt.Fprintf(out, "login %-20s %-32s accounts %s\n", d.login.Name, "("+what+")", strings.Join(names, " "))
	}
	fmt.Fprintln(out, "passwords: $TRADOVATESIM_PASSWORD (sim-password when unset)")
	for _, p := range []string{"ES", "NQ", "ZN"} {
		if c := sim.Contracts(p); len(c) > 0 {
			fmt.Fprintf(out, "%s months: %s (trade now: %s)\n", p, strings.Join(c, " "), sim.FrontContract(p))
		}
	}
	<-ctx.Done()
	err = sim.Close()
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}
