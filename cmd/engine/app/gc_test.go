package app

import (
	"math"
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
