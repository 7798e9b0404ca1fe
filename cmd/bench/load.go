package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"
)

// sample is one measured load: how many operations completed inside the
// measured window, their rate and latency percentiles.
type sample struct {
	N        int
	Window   time.Duration
	Rate     float64 // operations per second
	P50, P99 time.Duration
	Max      time.Duration
	Errors   int
	FirstErr string
	CPU      time.Duration // process CPU (user+system) per operation inside the window
	// Gen is the CPU per operation of a load generator run in a process
	// of its own (HTTP orders), not counted in CPU.
	Gen time.Duration
}

func (s sample) String() string {
	e := ""
	if s.Errors > 0 {
		e = fmt.Sprintf(", %d errors (%s)", s.Errors, s.FirstErr)
	}
	return fmt.Sprintf("%.0f/s p50 %s p99 %s max %s, %.0fus CPU/op (n=%d%s)", s.Rate, ms(s.P50), ms(s.P99), ms(s.Max), float64(s.CPU)/1e3, s.N, e)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }

// percentile of sorted durations, p in [0,1].
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1)+0.5)]
}

// summarize sorts lats in place and fills the latency fields of s.
func summarize(s *sample, lats []time.Duration) {
	slices.Sort(lats)
	s.N = len(lats)
	s.P50, s.P99 = percentile(lats, 0.50), percentile(lats, 0.99)
	if len(lats) > 0 {
		s.Max = lats[len(lats)-1]
	}
	if s.Window > 0 {
		s.Rate = float64(s.N) / s.Window.Seconds()
	}
}

// drive runs op in a closed loop on workers goroutines for warm+dur. Only
// operations that start after the warm-up and finish inside the window count.
// op gets the worker index and the worker's operation count so far.
func drive(ctx context.Context, workers int, warm, dur time.Duration, op func(ctx context.Context, w, i int) error) sample {
	from := time.Now().Add(warm)
	return driveAt(ctx, workers, from, from.Add(dur), op)
}

// driveAt is drive with its measured window given as instants, so that two
// processes can measure the same window.
func driveAt(ctx context.Context, workers int, from, end time.Time, op func(ctx context.Context, w, i int) error) sample {
	dur := end.Sub(from)
	lats := make([][]time.Duration, workers)
	errs := make([]int, workers)
	firsts := make([]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				err := op(ctx, w, i)
				t1 := time.Now()
				if t0.Before(from) || t1.After(end) {
					continue
				}
				if err != nil {
					if errs[w] == 0 {
						firsts[w] = err.Error()
					}
					errs[w]++
					continue
				}
				lats[w] = append(lats[w], t1.Sub(t0))
			}
		}()
	}
	time.Sleep(time.Until(from))
	cpu0 := cpuTime()
	time.Sleep(time.Until(end))
	cpu1 := cpuTime()
	wg.Wait()
	s := collect(dur, lats, errs, firsts)
	if s.N > 0 {
		s.CPU = (cpu1 - cpu0) / time.Duration(s.N)
	}
	return s
}

// cpuTime is the CPU time (user and system) the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// collect is the sample of a window: every worker's latencies, its errors and
// the first error's text.
func collect(dur time.Duration, lats [][]time.Duration, errs []int, firsts []string) sample {
	s := sample{Window: dur}
	var all []time.Duration
	for w := range lats {
		all = append(all, lats[w]...)
		if errs[w] > 0 && s.FirstErr == "" {
			s.FirstErr = firsts[w]
		}
		s.Errors += errs[w]
	}
	summarize(&s, all)
	return s
}
