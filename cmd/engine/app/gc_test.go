package app

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
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

// Serving sets the collector to ServeGOGC within half the memory the process
// may use, unless the operator set GOGC or GOMEMLIMIT.
func TestTuneGCKeepsWhatTheOperatorSet(t *testing.T) {
	pct := debug.SetGCPercent(100)
	defer debug.SetGCPercent(pct)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(limit)

	TuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != ServeGOGC {
		t.Errorf("GOGC %d, want %d", got, ServeGOGC)
	}
	if avail := memoryAvailable(); avail > 0 {
		if got := debug.SetMemoryLimit(math.MaxInt64); got != avail/2 {
			t.Errorf("memory limit %d, want half of %d", got, avail)
		}
	}

	debug.SetMemoryLimit(1 << 30)
	TuneGC(func(k string) string { return map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}[k] })
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Errorf("GOGC set by the operator became %d", got)
	}
	debug.SetGCPercent(100)
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("GOMEMLIMIT set by the operator became %d", got)
	}
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
