package app

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
)

// WarmGOGC is the collector's setting while the log replays at start.
const WarmGOGC = 400

// ServeGOGC is the collector's pace at most while the engine serves, the
// pace of a small live heap. The live heap grows with the accounts (10,000
// bracketed accounts hold about 240 MB), and a collection marks it all for
// 250-340 ms of wall time on two cores, while the runtime's fractional mark
// worker holds the processor an order's goroutine was made ready on (a
// handler waited up to 10 ms behind it in an execution trace). What share of
// the orders a collection reaches depends on how often it runs, which at a
// given allocation rate is the heap's growth between collections: at the
// runtime's GOGC 100 it doubled the HTTP p99 under a quote stream, at 400 it
// ran every 11-15 s under 10,000 trailing stops (2.0-2.7x the idle p99), at
// 1600 none ran in the 30 s stream (1.2-1.6x; with none at all, GOGC=off,
// 0.95x). The heap may grow to 17 times the live heap between collections;
// beyond ServeHeadroom the growth is ServeHeadroom (TuneGC).
const ServeGOGC = 1600

// ServeHeadroom is how far the heap may grow past the live heap between
// collections while the engine serves, unless ENGINE_GC_HEADROOM says
// otherwise. With a fixed multiplier (ServeGOGC) whatever the live heap holds
// was resident 17 times over (3.5 KB resident an order of history for about
// 200 B live, issue 46); with a fixed headroom the resident memory is the
// live heap plus about this much however large the live heap grows.
// 512 MiB: a collection after every 512 MiB allocated costs, per byte
// allocated, at most what the runtime's own GOGC 100 does for live heaps up
// to 512 MiB, and a live heap of up to 32 MiB (the service with a few
// accounts holds about 16 MB) keeps ServeGOGC.
// 10,000 bracketed accounts (about 240 MB live) serve at about GOGC 200
// rather than 1600, and under the brackets bench's quote stream the ordinary
// orders' p99 was 2.79x idle against 0.28x at GOGC 1600 (one run each on a
// busy machine): such a deployment raises ENGINE_GC_HEADROOM or sets GOGC
// (docs/performance.md, "The collector's pace").
const ServeHeadroom = 512 << 20

// ServeGOGCFloor is the collector's pace at least while the engine serves:
// past a live heap of four times the headroom (2 GiB at ServeHeadroom: memory
// read models of some millions of commits) the heap grows by a quarter of the
// live heap, so a collection, which marks all of it, does not follow another
// after a fraction of its own size allocated.
const ServeGOGCFloor = 25

// TuneGC sets the collector for serving: a pace (servePace) whose heap goal
// after each collection is the live heap plus a headroom (ENGINE_GC_HEADROOM
// from getenv, a byte count such as 512MiB or 1GiB; ServeHeadroom if unset),
// within a soft memory limit of half the memory the process may use. GOGC
// and GOMEMLIMIT, where the operator set them (getenv), are kept as the
// runtime read them; with GOGC set there is no pace. It reports a headroom it
// cannot read. However often it is called, one pace runs in the process, at
// the last call's headroom.
func TuneGC(getenv func(string) string) error {
	headroom := uint64(ServeHeadroom)
	if v := getenv("ENGINE_GC_HEADROOM"); v != "" {
		n, err := parseBytes(v)
		if err != nil || n == 0 {
			return fmt.Errorf("ENGINE_GC_HEADROOM %q: want a byte count above 0 such as 512MiB or 1GiB", v)
		}
		headroom = n
	}
	if getenv("GOGC") == "" {
		pace(headroom)
	} else {
		pace(0)
	}
	if getenv("GOMEMLIMIT") == "" {
		if avail := memoryAvailable(); avail > 0 {
			debug.SetMemoryLimit(avail / 2)
		}
	}
	return nil
}

// servePace is the GC percent whose heap goal is the live heap (live, the
// bytes the last collection marked) plus headroom, the runtime's goal being
// live + (live + roots) * percent / 100 with roots the stacks and globals the
// last collection scanned; never more than ServeGOGC (a small live heap
// keeps its pace) nor less than ServeGOGCFloor.
func servePace(live, roots, headroom uint64) int {
	base := live + roots
	if base == 0 || headroom/base >= ServeGOGC/100 {
		return ServeGOGC
	}
	return max(int(headroom*100/base), ServeGOGCFloor)
}

// gcPace is the process's pace, one as the collector is one: the headroom
// (0: no pace), the GC percent the pace set last, and whether a collection
// calls it back. Its lock is held wherever this package changes the GC
// percent (the pace and RelaxGC), so neither undoes the other's.
var gcPace struct {
	sync.Mutex
	headroom uint64
	set      int
	armed    bool
}

// pace sets the GC percent for headroom now and after every collection from
// then on, while the GC percent is the one it set last: a warm-up's
// (RelaxGC) or anyone else's setting is left alone until it is given back.
// A headroom of 0 stops it at the next collection.
func pace(headroom uint64) {
	gcPace.Lock()
	defer gcPace.Unlock()
	gcPace.headroom = headroom
	if headroom == 0 {
		return
	}
	live, roots := heapLive()
	gcPace.set = servePace(live, roots, headroom)
	debug.SetGCPercent(gcPace.set)
	if !gcPace.armed {
		gcPace.armed = true
		armPace()
	}
}

// armPace calls repace after the next collection, through the finalizer of
// an object nothing refers to, which repace sets again: the finalizer runs
// once the collection that found the object unreachable has ended, on the
// runtime's finalizer goroutine, so repace must be short.
func armPace() {
	runtime.SetFinalizer(&paceMark{}, repace)
}

// paceMark is the object armPace follows; a pointer keeps it out of the tiny
// allocator, whose blocks are shared and so may never be found unreachable.
type paceMark struct{ _ *byte }

// repace sets the GC percent for the live heap the collection that just
// ended marked, then arms itself again, unless the pace was stopped.
func repace(m *paceMark) {
	gcPace.Lock()
	defer gcPace.Unlock()
	if gcPace.headroom == 0 {
		gcPace.armed = false
		return
	}
	if gogc() == gcPace.set {
		live, roots := heapLive()
		if p := servePace(live, roots, gcPace.headroom); p != gcPace.set {
			debug.SetGCPercent(p)
			gcPace.set = p
		}
	}
	runtime.SetFinalizer(m, repace)
}

// heapLive is the bytes the last collection marked and the stacks and
// globals it scanned (runtime/metrics, read without stopping the world).
func heapLive() (live, roots uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(s)
	for i, x := range s {
		if x.Value.Kind() != metrics.KindUint64 {
			continue
		}
		if i == 0 {
			live = x.Value.Uint64()
		} else {
			roots += x.Value.Uint64()
		}
	}
	return live, roots
}

// gogc is the GC percent in force (-1: off).
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int(s[0].Value.Uint64())
}

// parseBytes reads a byte count as GOMEMLIMIT is written: digits and an
// optional unit B, KiB, MiB, GiB or TiB.
func parseBytes(s string) (uint64, error) {
	num, shift := s, 0
	for _, u := range []struct {
		suffix string
		shift  int
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"B", 0}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, err
	}
	if n > math.MaxUint64>>shift {
		return 0, fmt.Errorf("%s: too large", s)
	}
	return n << shift, nil
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
	gcPace.Lock()
	defer gcPace.Unlock()
	pct := debug.SetGCPercent(WarmGOGC)
	limit := debug.SetMemoryLimit(-1)
	if avail := memoryAvailable(); limit == math.MaxInt64 && avail > 0 {
		debug.SetMemoryLimit(avail / 2)
	}
	return func() {
		gcPace.Lock()
		defer gcPace.Unlock()
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
