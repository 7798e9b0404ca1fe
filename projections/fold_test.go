package projections

import (
	"math"
	"testing"
)

func TestSeqKeySortsInSequenceOrder(t *testing.T) {
	seqs := []uint64{0, 1, 9, 10, 99, 100, 12345678901, math.MaxUint64}
	for i, s := range seqs {
		k := SeqKey(s)
		if len(k) != 20 {
			t.Fatalf("SeqKey(%d) = %q, want 20 digits", s, k)
		}
		if i > 0 && SeqKey(seqs[i-1]) >= k {
			t.Errorf("SeqKey(%d) = %q does not sort after SeqKey(%d) = %q", s, k, seqs[i-1], SeqKey(seqs[i-1]))
		}
	}
	if got := SeqKey(math.MaxUint64); got != "18446744073709551615" {
		t.Errorf("SeqKey(max) = %q", got)
	}
	if got := SeqKey(42); got != "00000000000000000042" {
		t.Errorf("SeqKey(42) = %q", got)
	}
}
