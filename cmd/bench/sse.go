package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// sseResult is the fan-out of one account's frames to many subscribers.
type sseResult struct {
	Subs       int
	Connect    time.Duration // time to open every stream and read its first frame
	Commits    int           // orders committed while the streams were open
	Deliveries int           // (commit, subscriber) pairs measured
	Exact      int           // pairs where the subscriber read that very revision (others read a newer one: conflation)
	Missed     int           // pairs never delivered
	P50, P99   time.Duration
	Max        time.Duration
}

// raiseNoFile lifts the open files limit to at least n (root may raise the hard limit).
func raiseNoFile(n uint64) (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur >= n {
		return l.Cur, nil
	}
	want := syscall.Rlimit{Cur: n, Max: max(n, l.Max)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		want = syscall.Rlimit{Cur: l.Max, Max: l.Max}
		if err2 := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err2 != nil {
			return l.Cur, err
		}
		return l.Max, err
	}
	return n, nil
}

type recv struct {
	rev uint64
	at  int64 // wall clock, Unix nanoseconds
}

// sseSub is one real HTTP connection reading /api/account/stream.
type sseSub struct {
	conn  net.Conn
	got   []recv
	last  atomic.Uint64
	first chan struct{}
	done  chan struct{}
}

func dialStream(host, path, key string) (*sseSub, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", host, 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + key + "\r\nAccept: text/event-stream\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		c.Close()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(c, 4096)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		c.Close()
		return nil, nil, fmt.Errorf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	_ = c.SetDeadline(time.Time{})
	s := &sseSub{conn: c, first: make(chan struct{}), done: make(chan struct{})}
	return s, bufio.NewReaderSize(resp.Body, 512), nil
}

// read records the arrival time of every `account` event's revision until the connection ends.
func (s *sseSub) read(br *bufio.Reader) {
	defer close(s.done)
	var rev uint64
	var name string
	long := false
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = true // the middle of a long data line: skip it
			continue
		}
		if err != nil {
			return
		}
		if long {
			long = false
			continue
		}
		switch {
		case len(line) == 1:
			if name == "account" && rev > 0 {
				s.got = append(s.got, recv{rev: rev, at: time.Now().UnixNano()})
				if s.last.Swap(rev) == 0 {
					close(s.first)
				}
			}
			rev, name = 0, ""
		case bytes.HasPrefix(line, []byte("id: ")):
			rev, _ = strconv.ParseUint(string(bytes.TrimSpace(line[4:])), 10, 64)
		case bytes.HasPrefix(line, []byte("event: ")):
			name = string(bytes.TrimSpace(line[7:]))
		}
	}
}

// ssePhase opens o.sseSubs streams of one account from a child process (each
// process keeps within its open files limit), commits market orders on the
// account at o.sseRate for o.sseDur, and measures for every commit and every
// subscriber the time from the commit's ack (engine.Account returning) to the
// subscriber reading a frame with that revision or a newer one (conflation).
// Both processes stamp with the wall clock.
func ssePhase(ctx context.Context, o opts, syncMode string) (sseResult, error) {
	var res sseResult
	s, err := startService(ctx, o, syncMode, 1, true)
	if err != nil {
		return res, err
	}
	defer s.Close()
	acct := s.Accounts[0]
	exe, err := os.Executable()
	if err != nil {
		return res, err
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, exe, "sse-client", "-addr", strings.TrimPrefix(s.URL, "http://"),
		"-path", "/api/account/stream?account="+acct.AccountNumber, "-subs", strconv.Itoa(o.sseSubs))
	cmd.Env = append(os.Environ(), "BENCH_SSE_KEY="+s.Key)
	if o.profile != "" {
		cmd.Env = append(cmd.Env, "BENCH_SSE_CPUPROFILE="+filepath.Join(o.profile, "sse-client.pprof"))
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return res, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	var connectNs int64
	if !lines.Scan() {
		return res, errors.New("sse client ended before its subscribers were ready")
	}
	if _, err := fmt.Sscanf(lines.Text(), "ready %d %d", &res.Subs, &connectNs); err != nil {
		return res, fmt.Errorf("sse client: %q: %w", lines.Text(), err)
	}
	res.Connect = time.Duration(connectNs)
	if n := s.App.Hub.Subscribers(); n < int64(o.sseSubs) {
		return res, fmt.Errorf("the hub counts %d subscribers, want %d", n, o.sseSubs)
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.sseRate))
	end := time.Now().Add(o.sseDur)
	w := bufio.NewWriter(stdin)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		seq, err := placeMarket(ctx, s, acct.AccountID, fmt.Sprintf("sse-%d", i), i)
		if err != nil {
			tick.Stop()
			return res, err
		}
		fmt.Fprintf(w, "ack %d %d\n", seq, time.Now().UnixNano())
		res.Commits++
	}
	tick.Stop()
	fmt.Fprintln(w, "end")
	if err := w.Flush(); err != nil {
		return res, err
	}
	if !lines.Scan() {
		return res, errors.New("sse client ended without a result")
	}
	var p50, p99, mx int64
	if _, err := fmt.Sscanf(lines.Text(), "result %d %d %d %d %d %d", &res.Deliveries, &res.Exact, &res.Missed, &p50, &p99, &mx); err != nil {
		return res, fmt.Errorf("sse client: %q: %w", lines.Text(), err)
	}
	res.P50, res.P99, res.Max = time.Duration(p50), time.Duration(p99), time.Duration(mx)
	return res, nil
}

// sseClient is the child process of ssePhase: it opens the streams, says
// "ready", reads the commits' acks ("ack <rev> <unixnano>" ... "end") from
// stdin, waits for the last revision to reach everyone, and prints
// "result <deliveries> <exact> <missed> <p50ns> <p99ns> <maxns>".
func sseClient(args []string) error {
	fs := flag.NewFlagSet("sse-client", flag.ContinueOnError)
	addr := fs.String("addr", "", "host:port of the service (127.0.0.1)")
	path := fs.String("path", "", "stream path with its query")
	n := fs.Int("subs", 10000, "subscribers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !strings.HasPrefix(*addr, "127.0.0.1:") {
		return fmt.Errorf("sse client: %s is not on 127.0.0.1", *addr)
	}
	if lim, err := raiseNoFile(uint64(*n + 1024)); lim < uint64(*n+64) {
		return fmt.Errorf("open files limit %d is too low for %d subscribers: %v", lim, *n, err)
	}
	key := os.Getenv("BENCH_SSE_KEY")
	if path := os.Getenv("BENCH_SSE_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	subs := make([]*sseSub, *n)
	idx := make(chan int)
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				sub, br, err := dialStream(*addr, *path, key)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				subs[i] = sub
				go sub.read(br)
			}
		}()
	}
	for i := range subs {
		idx <- i
	}
	close(idx)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	deadline := time.After(60 * time.Second)
	for _, sub := range subs {
		select {
		case <-sub.first:
		case <-deadline:
			return errors.New("subscribers did not all read their first frame within 60s")
		}
	}
	fmt.Printf("ready %d %d\n", len(subs), time.Since(start).Nanoseconds())

	var acks []recv
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() && in.Text() != "end" {
		var a recv
		if _, err := fmt.Sscanf(in.Text(), "ack %d %d", &a.rev, &a.at); err != nil {
			return fmt.Errorf("sse client: %q: %w", in.Text(), err)
		}
		acks = append(acks, a)
	}
	if len(acks) == 0 {
		return errors.New("sse client: no commits")
	}
	final := acks[len(acks)-1].rev
	wait := time.Now().Add(10 * time.Second)
	for _, sub := range subs {
		for sub.last.Load() < final && time.Now().Before(wait) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, sub := range subs {
		sub.conn.Close()
		<-sub.done
	}
	var r sseResult
	lats := make([]time.Duration, 0, len(subs)*len(acks))
	for _, sub := range subs {
		j := 0
		for _, a := range acks {
			for j < len(sub.got) && sub.got[j].rev < a.rev {
				j++
			}
			if j == len(sub.got) {
				r.Missed++
				continue
			}
			if sub.got[j].rev == a.rev {
				r.Exact++
			}
			lats = append(lats, time.Duration(max(0, sub.got[j].at-a.at)))
		}
	}
	slices.Sort(lats)
	r.Deliveries = len(lats)
	r.P50, r.P99 = percentile(lats, 0.5), percentile(lats, 0.99)
	if len(lats) > 0 {
		r.Max = lats[len(lats)-1]
	}
	fmt.Printf("result %d %d %d %d %d %d\n", r.Deliveries, r.Exact, r.Missed, r.P50.Nanoseconds(), r.P99.Nanoseconds(), r.Max.Nanoseconds())
	return nil
}
