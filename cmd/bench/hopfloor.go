package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// hopFloor is the floor of a paced provider order with its two HTTP hops:
// each op is a client's HTTP request to a loopback server standing for the
// engine, whose handler appends payload durably (as pairFloor, on a log
// opened as the engine opens its own), calls a second loopback server
// standing for the provider (a bare answer: no service time, as
// engine-added time counts none) and, with two appends, appends again
// before it answers. Two appends are this design's floor (the intent
// before anything is sent, the provider's answer recorded before the
// answer leaves); one is the floor of any design that commits the intent
// before sending, the answer leaving as soon as the provider answers.
func hopFloor(ctx context.Context, o opts, rate, appends int, payload []byte) (sample, error) {
	r, err := openRaw(ctx, o, o.sync)
	if err != nil {
		return sample{}, err
	}
	defer r.Close()
	js, last := r.log.JetStream(), r.lastSeqs("hop"+strconv.Itoa(appends), o.workers)
	prov, err := loopbackServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"orderId":1,"status":"FILLED"}`))
	}))
	if err != nil {
		return sample{}, err
	}
	defer prov.Close()
	out := httpClient(o.workers)
	engine, err := loopbackServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		wk, err := strconv.Atoi(req.URL.Query().Get("w"))
		if err != nil || wk < 0 || wk >= len(last) {
			http.Error(w, "worker", http.StatusBadRequest)
			return
		}
		subject := "evt.bench.hop" + strconv.Itoa(appends) + "." + strconv.Itoa(wk)
		if err := appendTo(req.Context(), js, subject, payload, &last[wk]); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err := post(req.Context(), out, prov.URL+"/fapi/v1/order", http.StatusOK); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if appends > 1 {
			if err := appendTo(req.Context(), js, subject, payload, &last[wk]); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"order":{"state":"filled"}}`))
	}))
	if err != nil {
		return sample{}, err
	}
	defer engine.Close()
	in := httpClient(o.workers)
	s, err := pacedOps(ctx, o, rate, func(ctx context.Context, w int) error {
		return post(ctx, in, engine.URL+"/api/trading/order?w="+strconv.Itoa(w), http.StatusOK)
	})
	if err != nil {
		return sample{}, fmt.Errorf("hop floor (%d appends): %w", appends, err)
	}
	return s, nil
}

// hopFloors measures hopFloor paced at rate with two appends and with one,
// saying each under what (the orders it is the floor of).
func hopFloors(ctx context.Context, o opts, rate int, what string) (two, one sample, err error) {
	for _, f := range []struct {
		appends int
		s       *sample
	}{{2, &two}, {1, &one}} {
		if *f.s, err = hopFloor(ctx, o, rate, f.appends, make([]byte, 625)); err != nil {
			return two, one, err
		}
		progress("%s paced: their floor with both HTTP hops (in, and out to a provider answering at once) and %d durable append(s): p50 %s p99 %s (n=%d)",
			what, f.appends, ms(f.s.P50), ms(f.s.P99), f.s.N)
	}
	return two, one, nil
}

// hopRows adds the hop floors' rows under a paced order's row, whose
// engine-added p50 is added.
func hopRows(t *table, added time.Duration, two, one sample) {
	t.add(row{"  its floor with both HTTP hops and two durable appends (this design), p50 / p99; engine-added against it", "",
		fmt.Sprintf("%s / %s", ms(two.P50), ms(two.P99)), f2(float64(added)/max(1, float64(two.P50))) + "x", "", ""})
	t.add(row{"  the same with one append (any design that commits the intent before sending), p50 / p99", "",
		fmt.Sprintf("%s / %s", ms(one.P50), ms(one.P99)), "", "<= 1 ms p50", passIf(one.P50 <= time.Millisecond)})
}

// loopback is an HTTP server on a loopback port of its own.
type loopback struct {
	URL string
	srv *http.Server
}

func loopbackServer(h http.Handler) (*loopback, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return &loopback{URL: "http://" + l.Addr().String(), srv: srv}, nil
}

func (l *loopback) Close() { _ = l.srv.Close() }

// post sends a small JSON body and wants status back, the answer read whole.
func post(ctx context.Context, c *http.Client, url string, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"symbol":"BTCUSDT","side":"BUY","type":"MARKET","quantity":"0.001"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		return errors.New("status " + strconv.Itoa(res.StatusCode) + ": " + string(b))
	}
	return nil
}
