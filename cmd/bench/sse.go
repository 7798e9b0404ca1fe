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
	"runtime"
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

// sseSub is one real HTTP connection reading /api/account/stream. After the
// response's headers its socket is read by an sseReader, not by a goroutine
// of its own, so the measuring process costs little beside the service.
type sseSub struct {
	fd    int // a non-blocking socket owned by the sub
	got   []recv
	last  atomic.Uint64
	first chan struct{}
	ended bool // the body ended or the socket failed; the reader's
	p     sseParser
}

// dialStream opens the stream and takes its socket from net.Conn, with the
// bytes of the body read along with the headers parsed already.
func dialStream(host, path, key string) (*sseSub, error) {
	c, err := net.DialTimeout("tcp", host, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + key + "\r\nAccept: text/event-stream\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(c, 4096)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return nil, fmt.Errorf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		return nil, fmt.Errorf("stream: transfer encoding %v, want chunked", resp.TransferEncoding)
	}
	_ = c.SetDeadline(time.Time{})
	// A duplicate of the socket outlives c: closing c takes the socket out of
	// the runtime's poller and leaves it open, non-blocking, for an sseReader.
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	if cerr := rc.Control(func(f uintptr) { fd, err = syscall.Dup(int(f)) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	s := &sseSub{fd: fd, first: make(chan struct{})}
	head, _ := br.Peek(br.Buffered())
	s.feed(head)
	return s, nil
}

// feed parses body bytes and records every `account` event's revision with the time it was parsed.
func (s *sseSub) feed(b []byte) {
	s.p.parse(b, func(rev uint64) {
		s.got = append(s.got, recv{rev: rev, at: time.Now().UnixNano()})
		if s.last.Swap(rev) == 0 {
			close(s.first)
		}
	}, func() { s.ended = true })
}

// sseParser decodes a chunked SSE body as it arrives, in pieces of any size:
// the `event:` and `id:` lines of each event, dispatched at its blank line.
// Data lines are skipped, not decoded.
type sseParser struct {
	state   int  // inSize, inData, inCRLF or inEnd
	n       int  // inSize: the size so far; inData: the bytes left in the chunk
	ext     bool // inSize: in a chunk extension
	line    [32]byte
	ln      int  // bytes of the current line (counted past len(line) too)
	account bool // the event is named account
	rev     uint64
}

const (
	inSize = iota
	inData
	inCRLF
	inEnd
)

func (p *sseParser) parse(b []byte, event func(rev uint64), end func()) {
	for len(b) > 0 {
		switch p.state {
		case inSize:
			c := b[0]
			b = b[1:]
			switch {
			case c == '\n':
				if p.n == 0 {
					p.state = inEnd
					end()
					return
				}
				p.state, p.ext = inData, false
			case c == '\r':
			case c == ';':
				p.ext = true
			case p.ext:
			case '0' <= c && c <= '9':
				p.n = p.n<<4 | int(c-'0')
			case 'a' <= c && c <= 'f':
				p.n = p.n<<4 | int(c-'a'+10)
			case 'A' <= c && c <= 'F':
				p.n = p.n<<4 | int(c-'A'+10)
			}
		case inData:
			k := min(p.n, len(b))
			p.lines(b[:k], event)
			b, p.n = b[k:], p.n-k
			if p.n == 0 {
				p.state = inCRLF
			}
		case inCRLF:
			c := b[0]
			b = b[1:]
			if c == '\n' {
				p.state = inSize
			}
		case inEnd:
			return
		}
	}
}

// lines splits body bytes into lines, keeping the start of the current one.
func (p *sseParser) lines(b []byte, event func(rev uint64)) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		if p.ln < len(p.line) {
			copy(p.line[p.ln:], seg)
		}
		p.ln += len(seg)
		if i < 0 {
			return
		}
		b = b[i+1:]
		p.endLine(event)
	}
}

func (p *sseParser) endLine(event func(rev uint64)) {
	n := p.ln
	p.ln = 0
	if n > 0 && n <= len(p.line) && p.line[n-1] == '\r' {
		n--
	}
	l := p.line[:min(n, len(p.line))]
	switch {
	case n == 0:
		if p.account && p.rev > 0 {
			event(p.rev)
		}
		p.account, p.rev = false, 0
	case bytes.HasPrefix(l, []byte("id: ")):
		p.rev = 0
		for _, c := range l[4:] {
			if c < '0' || c > '9' {
				p.rev = 0
				break
			}
			p.rev = p.rev*10 + uint64(c-'0')
		}
	case bytes.HasPrefix(l, []byte("event: ")):
		p.account = string(l[7:]) == "account" && n == len("event: account")
	}
}

// sseReader reads many subscribers' sockets from one epoll instance (level
// triggered): one read per socket that has bytes, then the parse.
type sseReader struct {
	ep   int
	subs []atomic.Pointer[sseSub] // by the index in the epoll event
	buf  []byte
}

func newSSEReader(n int) (*sseReader, error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &sseReader{ep: ep, subs: make([]atomic.Pointer[sseSub], n), buf: make([]byte, 64<<10)}, nil
}

func (r *sseReader) add(i int, s *sseSub) error {
	if s.ended {
		return nil
	}
	if err := syscall.SetNonblock(s.fd, true); err != nil {
		return err
	}
	r.subs[i].Store(s)
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(i)}
	return syscall.EpollCtl(r.ep, syscall.EPOLL_CTL_ADD, s.fd, &ev)
}

// run reads until stop is set (it looks every 50 ms).
func (r *sseReader) run(stop *atomic.Bool) {
	evs := make([]syscall.EpollEvent, 256)
	for !stop.Load() {
		n, err := syscall.EpollWait(r.ep, evs, 50)
		if err != nil {
			continue // EINTR
		}
		for _, ev := range evs[:n] {
			s := r.subs[ev.Fd].Load()
			k, err := syscall.Read(s.fd, r.buf)
			if k > 0 {
				s.feed(r.buf[:k])
			}
			if k == 0 || (err != nil && err != syscall.EAGAIN) || s.ended {
				s.ended = true
				_ = syscall.EpollCtl(r.ep, syscall.EPOLL_CTL_DEL, s.fd, nil)
			}
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
	s, err := startService(ctx, o, syncMode, 1, true, "")
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

// subscriberSet is n open streams read by GOMAXPROCS epoll readers.
type subscriberSet struct {
	subs    []*sseSub
	readers []*sseReader
	stop    atomic.Bool
	rwg     sync.WaitGroup
}

// halt stops the readers: what each subscriber got stays as it is.
func (s *subscriberSet) halt() {
	s.stop.Store(true)
	s.rwg.Wait()
}

// close halts the readers and closes every socket.
func (s *subscriberSet) close() {
	s.halt()
	for _, sub := range s.subs {
		if sub != nil {
			syscall.Close(sub.fd)
		}
	}
	for _, r := range s.readers {
		syscall.Close(r.ep)
	}
}

// openSubscribers opens n streams, subscriber i on path(i), 64 dials at a
// time, and waits (60 s at most) until every one has read its first frame;
// it answers how long that took. The caller closes the set.
func openSubscribers(addr, key string, n int, path func(i int) string) (*subscriberSet, time.Duration, error) {
	set := &subscriberSet{subs: make([]*sseSub, n)}
	for range runtime.GOMAXPROCS(0) {
		r, err := newSSEReader(n)
		if err != nil {
			set.close()
			return nil, 0, err
		}
		set.readers = append(set.readers, r)
	}
	for _, r := range set.readers {
		set.rwg.Go(func() { r.run(&set.stop) })
	}
	idx := make(chan int)
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range 64 {
		wg.Go(func() {
			for i := range idx {
				sub, err := dialStream(addr, path(i), key)
				if err == nil {
					set.subs[i] = sub
					err = set.readers[i%len(set.readers)].add(i, sub)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	for i := range set.subs {
		idx <- i
	}
	close(idx)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		set.close()
		return nil, 0, fmt.Errorf("connect: %w", err)
	}
	deadline := time.After(60 * time.Second)
	for _, sub := range set.subs {
		select {
		case <-sub.first:
		case <-deadline:
			set.close()
			return nil, 0, errors.New("subscribers did not all read their first frame within 60s")
		}
	}
	return set, time.Since(start), nil
}

// loopbackChild checks a child process's flags: who connects only to
// addr on 127.0.0.1, and may open conns connections (raising its open
// files limit for them).
func loopbackChild(who, addr string, conns int) error {
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		return fmt.Errorf("%s: %s is not on 127.0.0.1", who, addr)
	}
	if lim, err := raiseNoFile(uint64(conns + 1024)); lim < uint64(conns+64) {
		return fmt.Errorf("%s: open files limit %d is too low for %d connections: %v", who, lim, conns, err)
	}
	return nil
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
	if err := loopbackChild("sse client", *addr, *n); err != nil {
		return err
	}
	key := os.Getenv("BENCH_SSE_KEY")
	if path := os.Getenv("BENCH_SSE_CPUPROFILE"); path != "" {
		stop, err := cpuProfile(path)
		if err != nil {
			return err
		}
		defer stop()
	}
	streamPath := *path
	set, took, err := openSubscribers(*addr, key, *n, func(int) string { return streamPath })
	if err != nil {
		return err
	}
	defer set.close()
	subs := set.subs
	fmt.Printf("ready %d %d\n", len(subs), took.Nanoseconds())

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
	set.halt()
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
