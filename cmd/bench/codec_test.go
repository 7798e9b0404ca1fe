package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/memory"
)

// commits makes n encoded market-order commits over accounts accounts, in log order.
func commits(b *testing.B, n, accounts int) (subjects []string, data [][]byte) {
	b.Helper()
	g := newCommitGen()
	states := make([]*account.State, accounts)
	for k := range states {
		states[k] = account.New(fmt.Sprintf("acct_bench_%06d", k+1))
		d, err := g.open(states[k], k)
		if err != nil {
			b.Fatal(err)
		}
		subjects, data = append(subjects, evacct.Subject(states[k].ID)), append(data, d)
	}
	for i := 0; len(data) < n; i++ {
		k := i % accounts
		d, err := g.order(states[k], k, i/accounts)
		if err != nil {
			b.Fatal(err)
		}
		subjects, data = append(subjects, evacct.Subject(states[k].ID)), append(data, d)
	}
	return subjects, data
}

// BenchmarkCommitDecode is the codec's share of every replay: one market-order commit.
func BenchmarkCommitDecode(b *testing.B) {
	reg := engine.Registry()
	data, err := sampleCommit()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommitEncode is the codec's share of every command.
func BenchmarkCommitEncode(b *testing.B) {
	reg := engine.Registry()
	data, err := sampleCommit()
	if err != nil {
		b.Fatal(err)
	}
	c, err := reg.Decode(data)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Encode(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecimalParse is one decimal string to events.Decimal.
func BenchmarkDecimalParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.ParseDecimal("65012.5"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFold is projections.Core folding decoded commits into the memory
// store in the projector's batches (decode excluded).
func BenchmarkFold(b *testing.B) {
	const n = 100_000
	subjects, data := commits(b, n, 100)
	reg := engine.Registry()
	batch := make([]events.Committed, len(data))
	for i := range data {
		c, err := reg.Decode(data[i])
		if err != nil {
			b.Fatal(err)
		}
		batch[i] = events.Committed{Subject: subjects[i], Seq: uint64(i + 1), Commit: c}
	}
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		b.StopTimer()
		p := projections.NewProjector(memory.New(), reg, projections.Core)
		b.StartTimer()
		for i := 0; i < n && done < b.N; i += projections.MaxBatch {
			j := min(i+projections.MaxBatch, n, i+b.N-done)
			if err := p.ApplyBatch(context.Background(), batch[i:j]); err != nil {
				b.Fatal(err)
			}
			done += j - i
		}
	}
}

// BenchmarkAggregateApply is account.Apply of decoded commits (the warm-up without decode).
func BenchmarkAggregateApply(b *testing.B) {
	const n = 100_000
	subjects, data := commits(b, n, 100)
	reg := engine.Registry()
	decoded := make([]events.Commit, len(data))
	for i := range data {
		c, err := reg.Decode(data[i])
		if err != nil {
			b.Fatal(err)
		}
		decoded[i] = c
	}
	b.ReportAllocs()
	b.ResetTimer()
	states := map[string]*account.State{}
	for i := 0; i < b.N; i++ {
		if i%n == 0 {
			clear(states)
		}
		s := states[subjects[i%n]]
		if s == nil {
			s = account.New(subjects[i%n])
			states[subjects[i%n]] = s
		}
		for _, e := range decoded[i%n].Events {
			account.Apply(s, e)
		}
	}
}

// BenchmarkGenerate is one commit of the cold-start generator: Decide, Apply, Encode.
func BenchmarkGenerate(b *testing.B) {
	g := newCommitGen()
	s := account.New("acct_bench_000001")
	if _, err := g.open(s, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := g.order(s, 0, i); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
