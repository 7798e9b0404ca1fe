package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// httpPath measures POST /api/trading/order market orders from one keep-alive
// client per worker, each on its own account, through the real handler. The
// clients run in a child process (http-load) over the same measured window,
// so the sample's CPU is the engine's own (with its embedded nats-server)
// and the load generator's is reported apart (Gen): in one process the
// generator's HTTP client counted as about a sixth of the engine's CPU.
func (s *service) httpPath(ctx context.Context, o opts) sample {
	accounts := make([]string, o.workers)
	for w := range accounts {
		accounts[w] = s.Accounts[w].AccountNumber
	}
	// The child starts and connects within the warm-up.
	from := time.Now().Add(max(o.warm, 300*time.Millisecond))
	return s.httpChild(ctx, accounts, 0, from, from.Add(o.dur))
}

// httpChild runs the http-load child over [from, end): one keep-alive client
// per account, each sending its next order when the last is answered (rate 0)
// or on a schedule of rate orders a second in all. The sample's CPU is this
// process's over the window per order; the child's own is its Gen.
func (s *service) httpChild(ctx context.Context, accounts []string, rate float64, from, end time.Time) sample {
	n := strconv.FormatInt(window.Add(1), 10)
	failed := func(err error) sample {
		return sample{Window: end.Sub(from), Errors: 1, FirstErr: "http-load: " + err.Error()}
	}
	exe, err := os.Executable()
	if err != nil {
		return failed(err)
	}
	cmd := exec.CommandContext(ctx, exe, "http-load", "-url", s.URL, "-accounts", strings.Join(accounts, ","),
		"-window", n, "-from", strconv.FormatInt(from.UnixNano(), 10), "-end", strconv.FormatInt(end.UnixNano(), 10),
		"-rate", strconv.FormatFloat(rate, 'f', -1, 64))
	cmd.Env = append(os.Environ(), "BENCH_HTTP_KEY="+s.Key) // not on the command line, which ps shows
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Start(); err != nil {
		return failed(err)
	}
	time.Sleep(time.Until(from))
	cpu0 := cpuTime()
	time.Sleep(time.Until(end))
	cpu1 := cpuTime()
	if err := cmd.Wait(); err != nil {
		return failed(err)
	}
	var res sample
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return failed(fmt.Errorf("its answer %.200q: %w", out.Bytes(), err))
	}
	if res.N > 0 {
		res.CPU = (cpu1 - cpu0) / time.Duration(res.N)
	}
	return res
}

// httpLoad is the child process of httpChild: it drives market orders over
// HTTP, one keep-alive client per account, measures the window it is given
// and prints its sample as JSON, its own CPU per order as Gen.
func httpLoad(args []string) error {
	fs := flag.NewFlagSet("http-load", flag.ContinueOnError)
	url := fs.String("url", "", "the service (http://127.0.0.1:port)")
	accounts := fs.String("accounts", "", "comma-separated account numbers, one client each")
	win := fs.String("window", "0", "window number, part of every clientOrderId")
	from := fs.Int64("from", 0, "start of the measured window (unix ns)")
	end := fs.Int64("end", 0, "end of the measured window (unix ns)")
	rate := fs.Float64("rate", 0, "orders a second in all, on a schedule (0: each client sends when answered)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !strings.HasPrefix(*url, "http://127.0.0.1:") {
		return fmt.Errorf("http-load: %s is not on 127.0.0.1", *url)
	}
	accts := strings.Split(*accounts, ",")
	if *accounts == "" || *end <= *from {
		return fmt.Errorf("http-load: accounts and a window are required")
	}
	s := &service{URL: *url, Key: os.Getenv("BENCH_HTTP_KEY")}
	c := httpClient(len(accts))
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, *end).Add(30*time.Second))
	defer cancel()
	op := func(ctx context.Context, w, i int) error {
		return s.httpOrder(ctx, c, credAccount{AccountNumber: accts[w]}, "http-"+*win+"-"+strconv.Itoa(w)+"-"+strconv.Itoa(i), i)
	}
	var res sample
	if *rate > 0 {
		time.Sleep(time.Until(time.Unix(0, *from)))
		res = paced(ctx, len(accts), *rate, time.Duration(*end-*from), op)
	} else {
		res = driveAt(ctx, len(accts), time.Unix(0, *from), time.Unix(0, *end), op)
	}
	res.Gen, res.CPU = res.CPU, 0
	return json.NewEncoder(os.Stdout).Encode(res)
}
