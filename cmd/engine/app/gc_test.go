package app

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// The warm-up relaxes the collector within half the memory the process may
// use, and gives both settings back afterwards.
func TestRelaxGCBoundsAndRestores(t *testing.T) {
	pct := debug.SetGCPercent(100)
	defer debug.SetGCPercent(pct)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(limit)

	restore := RelaxGC()
	during := debug.SetGCPercent(-1)
	debug.SetGCPercent(during)
	bound := debug.SetMemoryLimit(-1)
	restore()
	if during != WarmGOGC {
		t.Errorf("GOGC during the warm-up %d, want %d", during, WarmGOGC)
	}
	if avail := memoryAvailable(); avail > 0 && bound != avail/2 {
		t.Errorf("memory limit during the warm-up %d, want half of %d", bound, avail)
	}
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Errorf("GOGC after %d, want 100", got)
	}
	debug.SetGCPercent(100)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit after %d, want none", got)
	}

	debug.SetMemoryLimit(1 << 30) // as GOMEMLIMIT=1GiB would
	RelaxGC()()
	restore = RelaxGC()
	kept := debug.SetMemoryLimit(-1)
	restore()
	if kept != 1<<30 {
		t.Errorf("a limit the operator set became %d", kept)
	}
}

// Serving paces the collector within half the memory the process may use,
// unless the operator set GOGC or GOMEMLIMIT; a heap as small as a test's
// keeps ServeGOGC.
func TestTuneGCKeepsWhatTheOperatorSet(t *testing.T) {
	pct := debug.SetGCPercent(100)
	defer debug.SetGCPercent(pct)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(limit)
	defer pace(0)

	if err := TuneGC(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if got := gogc(); got != ServeGOGC {
		t.Errorf("GOGC %d, want %d", got, ServeGOGC)
	}
	if avail := memoryAvailable(); avail > 0 {
		if got := debug.SetMemoryLimit(math.MaxInt64); got != avail/2 {
			t.Errorf("memory limit %d, want half of %d", got, avail)
		}
	}

	debug.SetGCPercent(150) // as GOGC=150 would
	debug.SetMemoryLimit(1 << 30)
	if err := TuneGC(func(k string) string { return map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}[k] }); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	if got := gogc(); got != 150 {
		t.Errorf("GOGC set by the operator became %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("GOMEMLIMIT set by the operator became %d", got)
	}
}

// A headroom the engine cannot read stops the start.
func TestTuneGCRefusesAnUnreadableHeadroom(t *testing.T) {
	for _, v := range []string{"lots", "512MB", "-1", "0", "1.5GiB"} {
		if err := TuneGC(func(k string) string {
			return map[string]string{"ENGINE_GC_HEADROOM": v, "GOGC": "100", "GOMEMLIMIT": "1GiB"}[k]
		}); err == nil {
			t.Errorf("ENGINE_GC_HEADROOM=%s accepted", v)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "4096": 4096, "17B": 17, "64KiB": 64 << 10, "512MiB": 512 << 20, "1GiB": 1 << 30, "2TiB": 2 << 40} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "1 GiB", "1GB", "1.5GiB", "-1", "16777216TiB"} {
		if got, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, got)
		}
	}
}

// The pace's heap goal is the live heap plus the headroom, within
// ServeGOGC for a small live heap and ServeGOGCFloor for a large one.
func TestServePace(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, roots, headroom uint64
		want                  int
	}{
		{0, 0, 512 * mib, ServeGOGC},              // nothing marked yet
		{16 * mib, 1 * mib, 512 * mib, ServeGOGC}, // 17 x 16 MiB is within live + 512 MiB
		{32 * mib, 0, 512 * mib, ServeGOGC},       // exactly 16 x live
		{40 * mib, 0, 512 * mib, 1280},
		{240 * mib, 0, 512 * mib, 213}, // 10,000 bracketed accounts
		{240 * mib, 16 * mib, 512 * mib, 200},
		{512 * mib, 0, 512 * mib, 100}, // the runtime's default
		{2048 * mib, 0, 512 * mib, 25}, // the floor
		{8192 * mib, 0, 512 * mib, ServeGOGCFloor},
		{240 * mib, 0, 1 << 30, 426},
		{240 * mib, 0, 1, ServeGOGCFloor},
	} {
		if got := servePace(c.live, c.roots, c.headroom); got != c.want {
			t.Errorf("servePace(%d MiB, %d MiB, %d MiB) = %d, want %d", c.live/mib, c.roots/mib, c.headroom/mib, got, c.want)
		}
	}
	for live := uint64(1); live < 1<<36; live = live*3 + 7 {
		for _, roots := range []uint64{0, 1 << 10, 8 << 20} {
			p := servePace(live, roots, ServeHeadroom)
			goal := live + (live+roots)*uint64(p)/100
			if p > ServeGOGCFloor && goal > live+ServeHeadroom {
				t.Fatalf("live %d, roots %d: GOGC %d makes the goal %d, past live + headroom %d", live, roots, p, goal, live+ServeHeadroom)
			}
		}
	}
}

// After each collection the pace sets the heap goal to the live heap plus
// the headroom; a warm-up's setting is left alone until it is given back.
func TestPaceFollowsTheLiveHeap(t *testing.T) {
	pct := debug.SetGCPercent(100)
	defer debug.SetGCPercent(pct)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(limit)
	defer pace(0)

	const headroom = 16 << 20
	if err := TuneGC(func(k string) string { return map[string]string{"ENGINE_GC_HEADROOM": "16MiB", "GOMEMLIMIT": "off"}[k] }); err != nil {
		t.Fatal(err)
	}
	var held [][]byte
	for range 48 {
		held = append(held, make([]byte, 1<<20)) // 48 MiB live: 16 MiB of headroom is GOGC 33 or so
	}
	// goalFollows collects until the pace has answered the collection.
	goalFollows := func() (goal, live uint64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			runtime.GC()
			l, roots := heapLive()
			want := servePace(l, roots, headroom)
			s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
			metrics.Read(s)
			if gogc() == want {
				return s[0].Value.Uint64(), l
			}
			if time.Now().After(deadline) {
				t.Fatalf("GOGC %d after collections, want %d (live %d)", gogc(), want, l)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	goal, live := goalFollows()
	if goal > live+headroom || goal < live+headroom/2 {
		t.Errorf("heap goal %d MiB for %d MiB live, want about live + %d MiB", goal>>20, live>>20, headroom>>20)
	}
	if p := gogc(); p >= 100 {
		t.Errorf("GOGC %d for %d MiB live and 16 MiB of headroom", p, live>>20)
	}

	restore := RelaxGC()
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := gogc(); got != WarmGOGC {
		t.Errorf("GOGC %d during a warm-up, want %d", got, WarmGOGC)
	}
	restore()
	clear(held[1:]) // 1 MiB live: the pace gives it ServeGOGC's 17 x at most
	held = held[:1]
	goalFollows()
	l, roots := heapLive()
	if got, want := gogc(), servePace(l, roots, headroom); got != want || got < 100 {
		t.Errorf("GOGC %d after the warm-up for %d MiB live, want %d", got, l>>20, want)
	}
	runtime.KeepAlive(held)
}

// Serving runs one processor more than the runtime's default however often
// it starts, unless a CPU quota set the default or the operator set
// GOMAXPROCS.
func TestTuneProcsAddsOneProcessorOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	want := serveProcs(def, runtime.NumCPU(), cpuQuota())
	for range 2 {
		TuneProcs(func(string) string { return "" })
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Fatalf("GOMAXPROCS %d, want %d (the default %d, %d CPUs)", got, want, def, runtime.NumCPU())
		}
	}
	runtime.GOMAXPROCS(1)
	TuneProcs(func(k string) string { return map[string]string{"GOMAXPROCS": "1"}[k] })
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS set by the operator became %d", got)
	}
}

func TestServeProcsKeepsAQuotasDefault(t *testing.T) {
	for _, c := range []struct {
		def, cpus int
		quota     bool
		want      int
	}{
		{2, 2, false, 3}, // the CPUs set the default: one more
		{8, 8, false, 9},
		{1, 1, false, 2},
		{2, 8, true, 2}, // a quota of two CPUs on eight: kept
		{2, 8, false, 2},
		{2, 2, true, 2}, // a quota of 1.5 CPUs on two rounds up to the CPUs: still kept
	} {
		if got := serveProcs(c.def, c.cpus, c.quota); got != c.want {
			t.Errorf("serveProcs(%d, %d, %v) = %d, want %d", c.def, c.cpus, c.quota, got, c.want)
		}
	}
}
