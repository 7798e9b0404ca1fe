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
	out := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.workers}, Timeout: 10 * time.Second}
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
	in := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.workers}, Timeout: 10 * time.Second}
	s, err := pacedOps(ctx, o, rate, func(ctx context.Context, w int) error {
		return post(ctx, in, engine.URL+"/api/trading/order?w="+strconv.Itoa(w), http.StatusOK)
	})
	if err != nil {
		return sample{}, fmt.Errorf("hop floor (%d appends): %w", appends, err)
	}
	return s, nil
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
