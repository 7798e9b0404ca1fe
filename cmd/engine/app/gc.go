package app

import (
	"bufio"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// WarmGOGC is the collector's setting while the log replays at start.
const WarmGOGC = 400

// ServeGOGC is the collector's setting while the engine serves. The live
// heap grows with the accounts (10,000 bracketed accounts hold about 240 MB),
// and a collection marks it all for 250-340 ms of wall time on two cores,
// while the runtime's fractional mark worker holds the processor an order's
// goroutine was made ready on (a handler waited up to 10 ms behind it in an
// execution trace). What share of the orders a collection reaches depends on
// how often it runs, which at a given allocation rate is GOGC: at the
// runtime's 100 it doubled the HTTP p99 under a quote stream, at 400 it ran
// every 11-15 s under 10,000 trailing stops (2.0-2.7x the idle p99), at 1600
// none ran in the 30 s stream (1.2-1.6x; with none at all, GOGC=off, 0.95x).
// The heap may grow to 17 times the live heap between collections, within
// TuneGC's soft limit of half the memory the process may use (docs/
// performance.md, "The collector's pace").
const ServeGOGC = 1600

// TuneGC sets the collector for serving: ServeGOGC within a soft memory
// limit of half the memory the process may use, so the larger heap never
// costs more than that. GOGC and GOMEMLIMIT, where the operator set them
// (getenv), are kept as the runtime read them.
func TuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(ServeGOGC)
	}
	if getenv("GOMEMLIMIT") == "" {
		if avail := memoryAvailable(); avail > 0 {
			debug.SetMemoryLimit(avail / 2)
		}
	}
}

// ServeExtraProcs is how many processors the engine runs beyond the CPUs it
// may use. Go polls the network when a processor runs out of goroutines, or
// from its monitor at most every 10 ms; with every processor busy (two cores,
// 10,000 trailing stops moving under a quote stream) a request that had
// arrived waited up to that long to be read: the ordinary HTTP orders' p99
// was 9 ms against 3 ms for the same orders through the command path. With
// one processor more than the cores, the one the operating system leaves
// waiting on the network takes the request (HTTP p99 3.1-4.3 ms; docs/
// performance.md, "A processor for the network").
const ServeExtraProcs = 1

// TuneProcs sets the runtime's processors for serving (serveProcs), the same
// however often it runs, unless the operator set GOMAXPROCS (getenv).
func TuneProcs(getenv func(string) string) {
	if getenv("GOMAXPROCS") != "" {
		return
	}
	runtime.SetDefaultGOMAXPROCS()
	if n := serveProcs(runtime.GOMAXPROCS(0), runtime.NumCPU(), cpuQuota()); n != runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(n)
	}
}

// serveProcs is the processors to serve with, given the runtime's default
// (def), the CPUs the process may run on (cpus) and whether a CPU quota (a
// container's cgroup limit) applies: ServeExtraProcs more than the default,
// unless a quota applies or made the default lower than the CPUs. Under a
// quota, processors beyond it spend the quota early in each period and the
// process is throttled for the rest, a worse stall than the poll's; the
// default, which follows the quota as it changes, stays.
func serveProcs(def, cpus int, quota bool) int {
	if quota || def < cpus {
		return def
	}
	return def + ServeExtraProcs
}

// cpuQuota reports whether the process's cgroup limits its CPU time: cgroup
// v2's cpu.max other than "max", or cgroup v1's cpu.cfs_quota_us other than -1.
func cpuQuota() bool {
	if b, err := os.ReadFile("/sys/fs/cgroup/cpu.max"); err == nil {
		return !strings.HasPrefix(strings.TrimSpace(string(b)), "max")
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); err == nil {
		return strings.TrimSpace(string(b)) != "-1"
	}
	return false
}

// RelaxGC lets the collector run less often while the log replays: a replay
// allocates several times what it keeps, and every collection marks the
// growing aggregates again. The memory read models' documents are mostly
// packed strings with nothing to mark (projections.Packable), so a higher
// setting mostly costs fresh memory: over 1M commits 400 replayed the read
// models as fast as 1000 (5.5 s) in 2.1 GB rather than 3.2, 200 in 5.7 s
// (scripts/bench, cold). A soft memory limit of half
// the memory the process may use (its cgroup's limit, else the machine's)
// bounds what that costs; a limit set through GOMEMLIMIT is kept. The
// returned func restores both settings.
func RelaxGC() (restore func()) {
	pct := debug.SetGCPercent(WarmGOGC)
	limit := debug.SetMemoryLimit(-1)
	if avail := memoryAvailable(); limit == math.MaxInt64 && avail > 0 {
		debug.SetMemoryLimit(avail / 2)
	}
	return func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(limit)
	}
}

// memoryAvailable is the memory the process may use in bytes: the smaller of
// its cgroup v2 limit and the machine's memory, or 0 where neither is known.
func memoryAvailable() int64 {
	var total int64
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if kb, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(kb, "kB")), 10, 64)
				if err == nil {
					total = n << 10
				}
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	return total
}
