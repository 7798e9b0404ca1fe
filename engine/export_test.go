package engine

import (
	"context"
	"sort"

	"github.com/svc/engine/engine/venue"
)

// What the tests of package engine_test read of an engine.

// AccountIDs lists the accounts the engine holds, sorted.
func (e *Engine) AccountIDs() []string { return sortedIDs(e.accounts.Each) }

// VenueIDs lists the venues the engine holds, sorted.
func (e *Engine) VenueIDs() []string { return sortedIDs(e.venues.Each) }

func sortedIDs(each func(func(string))) []string {
	var ids []string
	each(func(id string) { ids = append(ids, id) })
	sort.Strings(ids)
	return ids
}

// InspectVenue runs fn on the venue's live state in its mailbox goroutine.
func (e *Engine) InspectVenue(ctx context.Context, id string, fn func(*venue.State, uint64)) error {
	return e.venues.Inspect(ctx, id, fn)
}

// StartedFromSnapshots reports what the start used of the snapshots: the
// bucket's mark, the sequence the replay started after, the aggregates
// seeded from a snapshot and those rebuilt from their whole subject.
func (e *Engine) StartedFromSnapshots() (mark, from uint64, seeded, rebuilt int) {
	s := e.started
	return s.mark, s.from, s.seeded, s.rebuilt
}

// RebaseWorkers is the bound on the Rebases in flight.
const RebaseWorkers = rebaseWorkers

// RebasePeak is the most rebase workers that ran at once.
func (e *Engine) RebasePeak() int {
	e.bookMarks.mu.Lock()
	defer e.bookMarks.mu.Unlock()
	return e.bookMarks.peak
}

// SnapshotsEncoded is how many states the snapshot rounds encoded.
func (e *Engine) SnapshotsEncoded() int {
	e.snaps.mu.Lock()
	defer e.snaps.mu.Unlock()
	return e.snaps.encoded
}
