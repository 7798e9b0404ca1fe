package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/events"
)

// service is the whole engine started in-process on a fresh data directory,
// served by a real net/http server on 127.0.0.1.
type service struct {
	App      *app.App
	URL      string
	Key      string
	Accounts []credAccount
	srv      *http.Server
	dir      string
}

type credAccount struct {
	Broker        string `json:"broker"`
	AccountNumber string `json:"accountNumber"`
	AccountID     string `json:"accountId"`
}

// startService starts the service as cmd/engine does, with accounts demo
// accounts, the rate limit off and the given sync setting; listen adds the
// HTTP server.
func startService(ctx context.Context, o opts, sync string, accounts int, listen bool, databaseURL string, ao ...app.Options) (*service, error) {
	dir, err := os.MkdirTemp(o.tmp, "bench-engine-")
	if err != nil {
		return nil, err
	}
	// The engine's own settings at their defaults, but for aggregate
	// snapshots and the projector's linger, which follow ENGINE_SNAPSHOTS and
	// ENGINE_PROJECTOR_LINGER when set (to measure them on and off).
	cfg, err := app.ParseConfig(nil, func(k string) string {
		if k == "ENGINE_SNAPSHOTS" || k == "ENGINE_PROJECTOR_LINGER" {
			return os.Getenv(k)
		}
		return ""
	}, io.Discard)
	if err != nil {
		return nil, err
	}
	cfg.DataDir, cfg.Sync, cfg.DemoAccounts, cfg.RateLimit, cfg.StreamsPerKey = dir, sync, accounts, 0, 100000
	cfg.Listen, cfg.DatabaseURL = "127.0.0.1:0", databaseURL
	var opt app.Options
	if len(ao) > 0 {
		opt = ao[0]
	}
	a, err := app.Start(ctx, cfg, opt)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &service{App: a, dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "dev-credentials.json"))
	if err == nil {
		var c struct {
			TradingKey string        `json:"tradingKey"`
			Accounts   []credAccount `json:"accounts"`
		}
		err = json.Unmarshal(b, &c)
		s.Key, s.Accounts = c.TradingKey, c.Accounts
	}
	if err == nil && len(s.Accounts) != accounts {
		err = fmt.Errorf("bench: %d demo accounts, want %d", len(s.Accounts), accounts)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	if listen {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.Close()
			return nil, err
		}
		s.URL = "http://" + ln.Addr().String()
		s.srv = &http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second}
		go s.srv.Serve(ln)
	}
	return s, nil
}

// Close stops the HTTP server, the service, and removes its data.
func (s *service) Close() {
	if s.srv != nil {
		s.srv.Close()
	}
	s.App.Close()
	os.RemoveAll(s.dir)
}

// side alternates so positions stay small and balances never run out.
func side(i int) string {
	if i%2 == 0 {
		return "buy"
	}
	return "sell"
}

var qty = events.MustDecimal("0.01")

// placeMarket runs one market order through the engine's command API: Decide,
// commit, ack (no HTTP, no wait for the read models).
func placeMarket(ctx context.Context, s *service, accountID, clientOrderID string, i int) (uint64, error) {
	e := s.App.Engine
	p := events.Principal{TenantID: app.DemoTenant, KeyID: "bench"}
	env := e.Envelope(p, clientOrderID, &trading.PlaceOrder{ClientOrderID: clientOrderID, Instrument: "BTC-PERP",
		Side: side(i), OrderType: "market", Quantity: qty})
	res, err := e.Account(ctx, accountID, env)
	if err != nil {
		return 0, err
	}
	if len(res.Events) < 2 {
		return 0, fmt.Errorf("order not filled: %d events", len(res.Events))
	}
	return res.Seq, nil
}

// window numbers measured windows, so client order ids never repeat on an account.
var window atomic.Int64

// commandPath measures market orders through engine.Engine.Account, one
// account per worker.
func (s *service) commandPath(ctx context.Context, o opts) sample {
	n := window.Add(1)
	return drive(ctx, o.workers, o.warm, o.dur, func(ctx context.Context, w, i int) error {
		_, err := placeMarket(ctx, s, s.Accounts[w].AccountID, fmt.Sprintf("cmd-%d-%d-%d", n, w, i), i)
		return err
	})
}

// settledPath is the command path plus the wait for the read models to show
// the commit (what every HTTP write does before answering): its excess over
// commandPath is the projector's share of the HTTP latency.
func (s *service) settledPath(ctx context.Context, o opts) sample {
	n := window.Add(1)
	return drive(ctx, o.workers, o.warm, o.dur, func(ctx context.Context, w, i int) error {
		seq, err := placeMarket(ctx, s, s.Accounts[w].AccountID, fmt.Sprintf("set-%d-%d-%d", n, w, i), i)
		if err != nil {
			return err
		}
		return s.App.Projector.WaitFor(ctx, seq)
	})
}

// httpClient keeps one connection per worker alive.
func httpClient(workers int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 2 * workers, MaxIdleConnsPerHost: 2 * workers, IdleConnTimeout: time.Minute,
		DisableCompression: true, ForceAttemptHTTP2: false,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}}
}

var filled = []byte(`"state":"filled"`)

// logTo sets the process's default logger as cmd/engine does (JSON to w at level).
func logTo(w io.Writer, level slog.Level) {
	slog.SetDefault(slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
}
