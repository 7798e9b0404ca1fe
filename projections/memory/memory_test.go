package memory_test

import (
	"testing"

	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/memory"
	"github.com/svc/engine/projections/storetest"
)

func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(testing.TB) projections.Store { return memory.New() })
}

func BenchmarkCore(b *testing.B) {
	storetest.BenchCore(b, func(testing.TB) projections.Store { return memory.New() })
}
