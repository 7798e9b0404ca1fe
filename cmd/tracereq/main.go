// Command tracereq cuts a Go execution trace of the engine into HTTP
// requests and tells where the slowest of them spent their time: running,
// ready but not running (and what ran meanwhile), or waiting, by the frame
// they waited in; and how many of the slowest overlap one of the collector's
// mark phases. It is how docs/performance.md attributes a tail:
//
//	scripts/bench -phases brackets -cpuprofile D -trace 20s
//	go run ./cmd/tracereq -top 8 D/brackets-stream.trace
//
// A request is the time a net/http connection's goroutine spends between two
// waits for the connection's next request; -handler keeps those whose
// goroutine stopped (waited, yielded, was preempted) inside the named
// function (default: the order route's handler, which waits for its commit).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	top := flag.Int("top", 10, "slowest requests to show")
	handler := flag.String("handler", "trading.(*Handlers).Order", "keep requests whose goroutine ran a function whose name holds this")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: tracereq [-top N] [-handler NAME] FILE.trace")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	rep, err := Analyze(f, *handler)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rep.Print(os.Stdout, *top)
}

// Request is one HTTP request's time, by state.
type Request struct {
	Goroutine  trace.GoID
	Start, End trace.Time
	Parts      map[string]time.Duration // "running", "runnable", "syscall", "waiting: <reason> in <frame>"
	Marking    time.Duration            // overlap with the collector's mark phases
	Others     map[string]time.Duration // what other goroutines ran meanwhile, by their frames
	handled    bool
}

// Took is the request's length.
func (r *Request) Took() time.Duration { return r.End.Sub(r.Start) }

// Report is what Analyze found.
type Report struct {
	Requests []*Request      // slowest first
	Marks    []time.Duration // each mark phase's length
}

type span struct {
	g     trace.GoID
	s, e  trace.Time
	label string
}

type goState struct {
	since   trace.Time
	waiting string // the reason and frame of the current wait
	idle    bool   // waiting for its connection's next request
	req     *Request
	ran     trace.Time
	label   string
}

// Analyze reads a trace and cuts it into requests of the handler's goroutines.
func Analyze(r io.Reader, handler string) (*Report, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	gs := map[trace.GoID]*goState{}
	var reqs []*Request
	var runs []span
	var marks [][2]trace.Time
	open := map[string]trace.Time{}
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch ev.Kind() {
		case trace.EventRangeBegin:
			open[ev.Range().Name] = ev.Time()
		case trace.EventRangeEnd:
			if n := ev.Range().Name; n == "GC concurrent mark phase" {
				if t, ok := open[n]; ok {
					marks = append(marks, [2]trace.Time{t, ev.Time()})
				}
			}
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			id := st.Resource.Goroutine()
			from, to := st.Goroutine()
			g := gs[id]
			if g == nil {
				g = &goState{}
				gs[id] = g
			}
			now, stk := ev.Time(), st.Stack
			if stk == trace.NoStack {
				stk = ev.Stack()
			}
			frames := stackFuncs(stk)
			if g.req != nil {
				g.req.Parts[partName(from, g.waiting)] += now.Sub(g.since)
				if strings.Contains(frames, handler) {
					g.req.handled = true
				}
			}
			idle := to == trace.GoWaiting && strings.Contains(frames, "net/http.(*conn).serve") && strings.Contains(frames, "Peek")
			switch {
			case idle && g.req != nil:
				g.req.End = now
				reqs = append(reqs, g.req)
				g.req = nil
			case from == trace.GoWaiting && g.idle && g.req == nil:
				g.req = &Request{Goroutine: id, Start: now, Parts: map[string]time.Duration{}, Others: map[string]time.Duration{}}
			}
			if to == trace.GoRunning {
				g.ran, g.label = now, label(stk)
			} else if from == trace.GoRunning {
				l := label(stk)
				if g.label != "" && g.label != l {
					l = g.label + " ... " + l
				}
				runs = append(runs, span{id, g.ran, now, l})
			}
			g.since, g.idle, g.waiting = now, idle, ""
			if to == trace.GoWaiting && !idle {
				g.waiting = st.Reason + " in " + firstOwn(stk)
			}
		}
	}
	rep := &Report{}
	for _, m := range marks {
		rep.Marks = append(rep.Marks, m[1].Sub(m[0]))
	}
	for _, q := range reqs {
		if !q.handled {
			continue
		}
		q.Marking = overlap(q.Start, q.End, marks)
		rep.Requests = append(rep.Requests, q)
	}
	sort.Slice(rep.Requests, func(i, j int) bool { return rep.Requests[i].Took() > rep.Requests[j].Took() })
	// What else ran during the slowest: cheap enough for a few dozen.
	for _, q := range rep.Requests[:min(32, len(rep.Requests))] {
		for _, s := range runs {
			if s.g == q.Goroutine {
				continue
			}
			a, b := max(q.Start, s.s), min(q.End, s.e)
			if b > a {
				q.Others[s.label] += b.Sub(a)
			}
		}
	}
	return rep, nil
}

func partName(s trace.GoState, waiting string) string {
	switch s {
	case trace.GoRunning:
		return "running"
	case trace.GoRunnable:
		return "runnable"
	case trace.GoSyscall:
		return "syscall"
	case trace.GoWaiting:
		return "waiting: " + waiting
	}
	return strings.ToLower(s.String())
}

func overlap(a, b trace.Time, spans [][2]trace.Time) time.Duration {
	var d time.Duration
	for _, x := range spans {
		if s, e := max(a, x[0]), min(b, x[1]); e > s {
			d += e.Sub(s)
		}
	}
	return d
}

func stackFuncs(s trace.Stack) string {
	var b []string
	for f := range s.Frames() {
		b = append(b, f.Func)
	}
	return strings.Join(b, " < ")
}

func runtimeFrame(fn string) bool {
	return strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "sync.") || strings.HasPrefix(fn, "internal/") || strings.HasPrefix(fn, "time.")
}

// firstOwn is the innermost frame outside the runtime, sync and time.
func firstOwn(s trace.Stack) string {
	for f := range s.Frames() {
		if !runtimeFrame(f.Func) {
			return f.Func
		}
	}
	return "?"
}

// label names a goroutine's run by its two innermost frames outside the
// runtime (a collector's worker has none: its innermost frame).
func label(s trace.Stack) string {
	var b []string
	first := ""
	for f := range s.Frames() {
		if first == "" {
			first = f.Func
		}
		if runtimeFrame(f.Func) {
			continue
		}
		if b = append(b, f.Func); len(b) == 2 {
			break
		}
	}
	if len(b) == 0 {
		return first
	}
	return strings.Join(b, " < ")
}

// Print writes the distribution and the top slowest with their parts.
func (r *Report) Print(w io.Writer, top int) {
	n := len(r.Requests)
	fmt.Fprintf(w, "%d requests; %d mark phases %v\n", n, len(r.Marks), r.Marks)
	if n == 0 {
		return
	}
	at := func(q float64) time.Duration { return r.Requests[int(float64(n-1)*(1-q))].Took() }
	slow := r.Requests[:max(1, n/100)]
	marked := 0
	for _, q := range slow {
		if q.Marking > 0 {
			marked++
		}
	}
	fmt.Fprintf(w, "p50 %v p99 %v max %v; of the slowest 1%% (%d), %d overlap a mark phase\n", at(0.5), at(0.99), r.Requests[0].Took(), len(slow), marked)
	for _, q := range r.Requests[:min(top, n)] {
		fmt.Fprintf(w, "%v (in a mark phase %v):", q.Took(), q.Marking)
		for _, p := range ranked(q.Parts, 4) {
			fmt.Fprintf(w, " [%s %v]", p.k, p.v)
		}
		fmt.Fprintln(w)
		for _, p := range ranked(q.Others, 4) {
			fmt.Fprintf(w, "    meanwhile %v: %s\n", p.v, p.k)
		}
	}
}

type kv struct {
	k string
	v time.Duration
}

func ranked(m map[string]time.Duration, n int) []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].v > out[j].v || out[i].v == out[j].v && out[i].k < out[j].k })
	return out[:min(n, len(out))]
}
