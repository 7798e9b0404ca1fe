package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/engine/snapshot"
	"github.com/svc/engine/engine/venue"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evvenue "github.com/svc/engine/events/venue"
)

// Aggregate snapshots (issue 22). The kinds Start warms, accounts and venues,
// are snapshotted into the log's snapshot bucket (engine/snapshot), and Start
// seeds them from it and replays the log only from the bucket's mark on.
//
// Policy: every SnapshotConfig.Every (10 s by default) one background
// goroutine runs a round. It reads the log position the node's states are
// current to (the log's last sequence on a single node; on a node of
// several, the last commit its follower handed to the mailboxes), asks every
// account and venue mailbox for its revision, and snapshots those that moved
// past their snapshot, at most PerRound (2,000) a round; the state's current
// part is encoded inside the mailbox goroutine between two commands, and its
// lists that grow with its history (account.History, the realized fills)
// outside it, where only the segments filled since the aggregate's last
// round are encoded and written (snapshot.Segs; each segment once). A state
// found too large for one value is encoded again only every tooLargeRounds
// rounds; the rounds between record it as one to rebuild from its subject
// without encoding it. Nothing runs on a command's path. The round then
// raises the mark to the oldest position every aggregate is known
// snapshotted to. Close runs one last round without the bound (at most
// 10 s). A snapshot is a pure function of the log up to its revision, so
// nodes of a cluster each write theirs; the bucket never takes an older
// snapshot over a newer one.

// SnapshotConfig shapes aggregate snapshots; the zero value keeps none.
type SnapshotConfig struct {
	// On reads the snapshots at Start and takes them in the background.
	On bool
	// Every is the time between two rounds; 0: DefaultSnapshotEvery.
	Every time.Duration
	// PerRound bounds the snapshots one round writes; 0: DefaultSnapshotsPerRound.
	PerRound int
	// MaxValue is the largest snapshot stored; 0: what the log's server takes
	// in one message (tests set less).
	MaxValue int
}

// tooLargeRounds is how many rounds a state found too large for one value
// is recorded as such without being encoded again.
const tooLargeRounds = 30

// DefaultSnapshotEvery is the time between two snapshot rounds.
const DefaultSnapshotEvery = 10 * time.Second

// DefaultSnapshotsPerRound bounds the snapshots one round writes.
const DefaultSnapshotsPerRound = 2000

// maxReloads is how many aggregates Start rebuilds one subject at a time
// (their snapshots ignored) before it replays the whole log instead.
const maxReloads = 256

// shapes is the Shape of each snapshotted kind.
var shapes = map[string]string{
	events.KindAccount: snapshot.Shape(account.StateVersion, account.State{}),
	events.KindVenue:   snapshot.Shape(venue.StateVersion, venue.State{}),
}

// snapshotter takes the snapshots (see the policy above).
type snapshotter struct {
	store    *snapshot.Store
	every    time.Duration
	perRound int
	position func(context.Context) (uint64, error)

	mu      sync.Mutex // one round at a time; guards the fields below
	aggs    map[string]*snapped
	prevAt  uint64 // the position of the last round (at first: Start's replay end)
	mark    uint64 // the mark as last written or read
	warned  map[string]uint64
	encoded int // states encoded (tests)

	stop context.CancelFunc
	done chan struct{}
}

// startStats is what a start used of the snapshots.
type startStats struct {
	mark, from      uint64 // the bucket's mark, and the sequence the replay started after
	seeded, rebuilt int    // aggregates seeded from a snapshot; rebuilt from their whole subject
}

// snapped is what the snapshotter knows of one aggregate.
type snapped struct {
	taken     uint64        // the revision of its snapshot in the bucket (0: none usable)
	confirmed uint64        // a position at which its snapshot had no commit of it after
	tooLarge  int           // rounds left in which it is not encoded: it was too large (tooLargeRounds)
	segs      snapshot.Segs // its lists' segments in the bucket
}

func snapKey(kind, id string) string { return kind + "/" + id }

// seedSnapshots reads the bucket into the rebuilt states: each usable
// snapshot seeds its aggregate (decoded on every core). It returns the mark,
// the aggregates to rebuild from their whole subject (snapshots ignored or
// unreadable) and the revision of each seeded one by subject.
func seedSnapshots(ctx context.Context, store *snapshot.Store, last uint64, accts *rebuilt[*account.State], venues *rebuilt[*venue.State]) (
	mark uint64, reload []string, seeded map[string]uint64, known map[string]snapshot.Segs, err error) {
	loaded, err := store.Load(ctx, last, shapes)
	if err != nil {
		return 0, nil, nil, nil, err
	}
	for _, ig := range loaded.Ignored {
		reload = append(reload, subjectOf(ig.Kind, ig.ID))
	}
	type decoded struct {
		snap  snapshot.Snap
		acct  *account.State
		venue *venue.State
		segs  snapshot.Segs
		err   error
	}
	out := make([]decoded, len(loaded.Snaps))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				d := decoded{snap: loaded.Snaps[i]}
				switch d.snap.Kind {
				case events.KindAccount:
					d.acct = new(account.State)
					d.segs, d.err = d.snap.Decode(d.acct)
				case events.KindVenue:
					d.venue = new(venue.State)
					d.segs, d.err = d.snap.Decode(d.venue)
				}
				out[i] = d
			}
		}()
	}
	for i := range loaded.Snaps {
		next <- i
	}
	close(next)
	wg.Wait()
	seeded = make(map[string]uint64, len(out))
	known = make(map[string]snapshot.Segs, len(out))
	for _, d := range out {
		subject := subjectOf(d.snap.Kind, d.snap.ID)
		if d.err != nil {
			slog.Warn("snapshot ignored; the aggregate is rebuilt from the log", "kind", d.snap.Kind, "id", d.snap.ID, "reason", d.err.Error())
			reload = append(reload, subject)
			continue
		}
		switch {
		case d.acct != nil:
			accts.state[d.snap.ID], accts.rev[d.snap.ID] = d.acct, d.snap.Rev
		case d.venue != nil:
			venues.state[d.snap.ID], venues.rev[d.snap.ID] = d.venue, d.snap.Rev
		}
		seeded[subject] = d.snap.Rev
		known[snapKey(d.snap.Kind, d.snap.ID)] = d.segs
	}
	return loaded.Mark, reload, seeded, known, nil
}

func subjectOf(kind, id string) string {
	if kind == events.KindVenue {
		return evvenue.Subject(id)
	}
	return evacct.Subject(id)
}

// chain checks, on the commits a replay reads, that each seeded aggregate's
// first commit after its snapshot was appended on the snapshot's revision
// (Nats-Expected-Last-Subject-Sequence), and that an aggregate seen first in
// a replay that did not start at the log's beginning was appended on nothing
// before (its first commit): an aggregate that fails either is rebuilt from
// its whole subject.
type chain struct {
	seeded  map[string]uint64
	checked map[string]bool
	broken  map[string]bool
}

func (c *chain) see(subject string, seq, prev uint64, hasPrev bool) {
	if c.checked[subject] || !(events.IsKind(subject, events.KindAccount) || events.IsKind(subject, events.KindVenue)) {
		return
	}
	want := c.seeded[subject]
	if seq <= want {
		return
	}
	c.checked[subject] = true
	if hasPrev && prev != want {
		c.broken[subject] = true
	}
}

// reloadSubject rebuilds one aggregate from its whole subject.
func reloadSubject[S any](ctx context.Context, e *Engine, r *rebuilt[S], id string) error {
	s := r.new(id)
	last, err := e.cfg.Log.Load(ctx, subjectOf(r.kind, id), func(m eventlog.Msg) error {
		c, err := e.reg.Decode(m.Data)
		if err != nil {
			return fmt.Errorf("%s %s at %d: %w", r.kind, id, m.Seq, err)
		}
		s = r.apply(s, m.Seq, c.Events)
		return nil
	})
	if err != nil {
		return fmt.Errorf("rebuild %s %s from the log: %w", r.kind, id, err)
	}
	if last == 0 {
		delete(r.state, id)
		delete(r.rev, id)
		return nil
	}
	r.state[id], r.rev[id] = s, last
	return nil
}

// startSnapshots starts the background rounds. taken is the revision of
// each aggregate's usable snapshot, known the segments it names, mark the
// bucket's mark (0: none) and at the position the states were rebuilt to.
func (e *Engine) startSnapshots(store *snapshot.Store, taken map[string]uint64, known map[string]snapshot.Segs, mark, at uint64) {
	cfg := e.cfg.Snapshots
	sn := &snapshotter{store: store, every: cfg.Every, perRound: cfg.PerRound, aggs: map[string]*snapped{}, prevAt: at, mark: mark,
		warned: map[string]uint64{}, done: make(chan struct{})}
	if sn.every <= 0 {
		sn.every = DefaultSnapshotEvery
	}
	if sn.perRound <= 0 {
		sn.perRound = DefaultSnapshotsPerRound
	}
	sn.position = func(ctx context.Context) (uint64, error) { return e.cfg.Log.LastSeq(ctx) }
	if e.clustered() {
		// Another node's commits reach this node's states through its
		// follower, in log order: they are current up to what it handed over.
		sn.position = func(context.Context) (uint64, error) { return e.nodes.at.Load(), nil }
	}
	for key, rev := range taken {
		st := &snapped{taken: rev}
		if rev > 0 {
			// Seeded from its snapshot, so its lists begin with the
			// segments that snapshot names: they need no second write. An
			// aggregate rebuilt from the log instead (rev 0 here) may hold
			// other elements under those indexes: its segments are written
			// from its state.
			st.segs = known[key]
		}
		if mark > 0 {
			st.confirmed = mark
		}
		sn.aggs[key] = st
	}
	e.snaps = sn
	ctx, stop := context.WithCancel(context.Background())
	sn.stop = stop
	go func() {
		defer close(sn.done)
		t := time.NewTicker(sn.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := e.SnapshotRound(ctx, sn.perRound); err != nil && ctx.Err() == nil {
				slog.Warn("snapshots: a round failed; the next one tries again", "err", err)
			}
		}
	}()
}

// stopSnapshots ends the rounds and runs a last one without the bound, for
// at most 10 s: a clean stop leaves every aggregate snapshotted.
func (e *Engine) stopSnapshots() {
	sn := e.snaps
	if sn == nil {
		return
	}
	sn.stop()
	<-sn.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.SnapshotRound(ctx, -1); err != nil {
		slog.Warn("snapshots: the last round before the stop failed; the next start replays more of the log", "err", err)
	}
}

// SnapshotRound runs one snapshot round now (the background rounds call it;
// so do tests and Close): it snapshots the accounts and venues that moved
// past their snapshot, at most limit of them (below 0: no bound), and raises
// the mark. It reports how many it wrote. Without snapshots it does nothing.
func (e *Engine) SnapshotRound(ctx context.Context, limit int) (int, error) {
	sn := e.snaps
	if sn == nil {
		return 0, nil
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	at, err := sn.position(ctx)
	if err != nil {
		return 0, fmt.Errorf("snapshots: the log's position: %w", err)
	}
	written := 0
	errA := snapRound(ctx, sn, events.KindAccount, e.accounts, at, limit, &written)
	errV := snapRound(ctx, sn, events.KindVenue, e.venues, at, limit, &written)
	mark := at
	for _, st := range sn.aggs {
		mark = min(mark, st.confirmed)
	}
	sn.prevAt = at
	var errM error
	if mark > sn.mark {
		if errM = sn.store.PutMark(ctx, mark); errM == nil {
			sn.mark = mark
		}
	}
	return written, errors.Join(errA, errV, errM)
}

// snapRound is a round's pass over one kind's mailboxes.
func snapRound[S any](ctx context.Context, sn *snapshotter, kind string, g *mailbox.Group[S], at uint64, limit int, written *int) error {
	var errs []error
	shape := shapes[kind]
	g.Each(func(id string) {
		if ctx.Err() != nil {
			return
		}
		key := snapKey(kind, id)
		st, ok := sn.aggs[key]
		if !ok {
			// Not seen by the last round: its commits all come after that round's position.
			st = &snapped{confirmed: sn.prevAt}
			sn.aggs[key] = st
		}
		var (
			rev     uint64
			merr    error
			pending snapshot.Pending
			enc     snapshot.Encoded
			took    bool
		)
		none := func() (uint64, error) { return sn.store.Put(ctx, kind, id, rev, shape, nil) }
		room := limit < 0 || *written < limit
		encode := st.tooLarge == 0
		err := g.Inspect(ctx, id, func(s S, r uint64) {
			rev = r
			if r > st.taken && room && encode {
				pending, merr = snapshot.Marshal(s)
				took = merr == nil
			}
		})
		if took { // outside the mailbox: the lists that grow with the history, only their segments not yet in the bucket
			enc, merr = pending.Encode(&st.segs)
			sn.encoded++
		}
		record := func(put func() (uint64, error)) { // a snapshot, or none: rebuild it from its subject
			*written++
			got, err := put()
			if errors.Is(err, snapshot.ErrTooLarge) {
				sn.warnOnce(key, rev, "snapshots: a state is too large to snapshot; the aggregate is rebuilt from its subject at each start", err)
				st.tooLarge, err = tooLargeRounds, nil
			}
			if err != nil {
				errs = append(errs, err)
				return
			}
			st.taken, st.confirmed = got, at
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s %s: %w", kind, id, err))
		case rev <= st.taken:
			st.confirmed = at // its snapshot holds every commit of it up to at
		case !room:
		case !encode:
			// Too large a round ago and only grown since: recorded as one to
			// rebuild from its subject without encoding it again.
			st.tooLarge--
			record(none)
		case merr != nil:
			// Stored without its state: the start rebuilds it from its subject.
			sn.warnOnce(key, rev, "snapshots: a state cannot be encoded; the aggregate is rebuilt from its subject at each start", merr)
			record(none)
		default:
			st.tooLarge = 0
			record(func() (uint64, error) { return sn.store.PutParts(ctx, kind, id, rev, shape, enc, &st.segs) })
		}
	})
	return errors.Join(errs...)
}

func (sn *snapshotter) warnOnce(key string, rev uint64, msg string, err error) {
	if sn.warned[key] == rev {
		return
	}
	sn.warned[key] = rev
	slog.Warn(msg, "aggregate", key, "rev", rev, "err", err)
}
