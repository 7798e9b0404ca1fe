package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/postgres"
	"github.com/svc/engine/projections/postgres/pgtest"
	"github.com/svc/engine/projections/storetest"
	schema "github.com/svc/engine/schema/postgres"
)

var ctx = context.Background()

func open(t testing.TB) projections.Store {
	return openURL(t, pgtest.URL(t))
}

func openURL(t testing.TB, url string) *postgres.Store {
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestStoreContract(t *testing.T) {
	storetest.Run(t, open)
}

// The contract holds too while reads answer from the documents the store
// committed (one engine, its only writer).
func TestStoreContractSoleWriter(t *testing.T) {
	storetest.Run(t, func(t testing.TB) projections.Store {
		s := openURL(t, pgtest.URL(t))
		s.SetSoleWriter(true)
		return s
	})
}

// A sole writer reads what it committed from memory: a row changed behind
// its back (which no sole writer's database sees) does not show, every
// commit of its own does, including a document first read from the
// database; not a sole writer, it reads the database; and a commit by
// another writer drops what it held.
func TestSoleWriterReadsItsOwnCommits(t *testing.T) {
	url := pgtest.URL(t)
	s := openURL(t, url)
	s.SetSoleWriter(true)
	get := func(key string) (int, bool) {
		t.Helper()
		var n int
		ok, err := s.Get(ctx, "c", key, &n)
		if err != nil {
			t.Fatal(err)
		}
		return n, ok
	}
	put := func(st *postgres.Store, seq uint64, key string, n int) {
		t.Helper()
		if err := st.Update(ctx, seq, func(tx projections.Tx) error { return tx.Put("c", key, n) }); err != nil {
			t.Fatal(err)
		}
	}
	behind := func(sql string) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	put(s, 1, "a", 1)
	behind(`UPDATE docs SET doc = '99' WHERE coll = 'c' AND key = 'a'`)
	if n, ok := get("a"); !ok || n != 1 {
		t.Fatalf("a = %d %v, want the committed 1", n, ok)
	}
	behind(`INSERT INTO docs (coll, key, doc) VALUES ('c', 'b', '5')`)
	if n, ok := get("b"); !ok || n != 5 { // read from the database, and kept
		t.Fatalf("b = %d %v, want 5", n, ok)
	}
	put(s, 2, "b", 6)
	if n, ok := get("b"); !ok || n != 6 {
		t.Fatalf("b = %d %v after its commit, want 6", n, ok)
	}
	if _, ok := get("none"); ok {
		t.Fatal("a missing document found")
	}
	put(s, 3, "none", 3)
	if n, ok := get("none"); !ok || n != 3 {
		t.Fatalf("none = %d %v after its commit, want 3", n, ok)
	}
	if err := s.Update(ctx, 4, func(tx projections.Tx) error { return tx.Delete("c", "a") }); err != nil {
		t.Fatal(err)
	}
	if _, ok := get("a"); ok {
		t.Fatal("a deleted document found")
	}

	s.SetSoleWriter(false)
	put(s, 5, "b", 8)
	behind(`UPDATE docs SET doc = '7' WHERE coll = 'c' AND key = 'b'`)
	if n, ok := get("b"); !ok || n != 7 {
		t.Fatalf("b = %d %v, want the database's 7", n, ok)
	}

	s.SetSoleWriter(true)
	put(s, 6, "b", 8)
	other := openURL(t, url)
	put(other, 7, "b", 9)
	put(s, 8, "c", 1) // finds the checkpoint moved by another writer: drops what it held
	if n, ok := get("b"); !ok || n != 9 {
		t.Fatalf("b = %d %v, want the other writer's 9", n, ok)
	}
}

func BenchmarkCore(b *testing.B) {
	storetest.BenchCore(b, open)
}

func TestMigrationsAreNumberedAndRerunnable(t *testing.T) {
	ms, err := postgres.LoadMigrations(schema.Migrations)
	if err != nil || len(ms) == 0 || ms[0].Version != 1 {
		t.Fatalf("migrations %+v: %v", ms, err)
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].Version <= ms[i-1].Version {
			t.Fatalf("migrations out of order: %s after %s", ms[i].Name, ms[i-1].Name)
		}
	}
	url := pgtest.URL(t)
	// Two nodes starting at once on an empty database: both succeed, the
	// migrations run once.
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			s, err := postgres.Open(ctx, url)
			if err == nil {
				s.Close()
			}
			errc <- err
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	applied, err := postgres.Migrate(ctx, pool, ms)
	if err != nil || len(applied) != 0 {
		t.Fatalf("re-run applied %v: %v", applied, err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(ms) {
		t.Fatalf("schema_migrations has %d rows, want %d: %v", n, len(ms), err)
	}
	// A later migration applies on top, once.
	more := append(slices.Clone(ms), postgres.Migration{Version: 999, Name: "999_test.sql",
		SQL: "CREATE TABLE t999 (a int); CREATE INDEX ON t999 (a);"})
	for want := range 2 {
		applied, err := postgres.Migrate(ctx, pool, more)
		if err != nil || len(applied) != 1-want {
			t.Fatalf("run %d applied %v: %v", want, applied, err)
		}
	}
	// A failing migration leaves nothing behind.
	bad := append(slices.Clone(more), postgres.Migration{Version: 1000, Name: "1000_bad.sql",
		SQL: "CREATE TABLE t1000 (a int); SELECT no_such_function();"})
	if _, err := postgres.Migrate(ctx, pool, bad); err == nil {
		t.Fatal("a failing migration succeeded")
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('t1000') IS NOT NULL`).Scan(&exists); err != nil || exists {
		t.Fatalf("failed migration left its table: %v %v", exists, err)
	}
}

func TestLoadMigrationsRejectsBadNames(t *testing.T) {
	for _, fsys := range []fstest.MapFS{
		{"store.sql": {Data: []byte("SELECT 1")}},
		{"001_a.sql": {Data: []byte("SELECT 1")}, "1_b.sql": {Data: []byte("SELECT 1")}},
	} {
		if _, err := postgres.LoadMigrations(fsys); err == nil {
			t.Errorf("LoadMigrations(%v) succeeded", fsys)
		}
	}
}

// TestWritersShareOneDatabase: two stores (two nodes) on one database. A
// store never folds on top of documents it remembers but another wrote over.
func TestWritersShareOneDatabase(t *testing.T) {
	url := pgtest.URL(t)
	s1, s2 := openURL(t, url), openURL(t, url)
	inc := func(s projections.Store, seq uint64) error {
		return s.Update(ctx, seq, func(tx projections.Tx) error {
			var n int
			if _, err := tx.Get("c", "n", &n); err != nil {
				return err
			}
			return tx.Put("c", "n", n+1)
		})
	}
	for seq, s := range []projections.Store{s1, s1, s2, s1, s2, s2, s1} {
		if err := inc(s, uint64(seq+1)); err != nil {
			t.Fatal(err)
		}
	}
	// Sequences already applied by the other node are skipped.
	if err := inc(s1, 7); err != nil {
		t.Fatal(err)
	}
	var n int
	if ok, err := s2.Get(ctx, "c", "n", &n); err != nil || !ok || n != 7 {
		t.Fatalf("n = %d (%v %v), want 7", n, ok, err)
	}
	boom := errors.New("boom")
	err := s1.Update(ctx, 8, func(tx projections.Tx) error {
		if err := tx.Put("c", "n", 100); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if err := inc(s1, 9); err != nil {
		t.Fatal(err)
	}
	if ok, err := s2.Get(ctx, "c", "n", &n); err != nil || !ok || n != 8 {
		t.Fatalf("n = %d (%v %v), want 8", n, ok, err)
	}
}

// TestLostCheckpointStopsUpdates: if the database forgets commits this store
// made (a crash with asynchronous commit), Update refuses to fold on top of
// the gap, once; the same store (a projector run again) and a fresh one (a
// restarted engine) resume from the checkpoint.
func TestLostCheckpointStopsUpdates(t *testing.T) {
	url := pgtest.URL(t)
	s := openURL(t, url)
	for seq := uint64(1); seq <= 3; seq++ {
		if err := s.Update(ctx, seq, func(tx projections.Tx) error { return tx.Put("c", "k", seq) }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE checkpoints SET seq = 2`); err != nil {
		t.Fatal(err)
	}
	err := s.Update(ctx, 4, func(tx projections.Tx) error { return tx.Put("c", "k", 4) })
	if !errors.Is(err, postgres.ErrCheckpointLost) {
		t.Fatalf("Update on a lost checkpoint: %v", err)
	}
	// The projector, told, folds again from the checkpoint through the same
	// store (an engine that stays up while PostgreSQL restarts).
	if cp, err := s.Checkpoint(ctx); err != nil || cp != 2 {
		t.Fatalf("checkpoint %d: %v", cp, err)
	}
	if err := s.Update(ctx, 3, func(tx projections.Tx) error { return tx.Put("c", "k", 3) }); err != nil {
		t.Fatalf("Update from the checkpoint after the loss: %v", err)
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE checkpoints SET seq = 2`); err != nil {
		t.Fatal(err)
	}
	restarted := openURL(t, url)
	if cp, err := restarted.Checkpoint(ctx); err != nil || cp != 2 {
		t.Fatalf("checkpoint %d: %v", cp, err)
	}
	if err := restarted.Update(ctx, 3, func(tx projections.Tx) error { return tx.Put("c", "k", 3) }); err != nil {
		t.Fatal(err)
	}
}

// A node that followed another's writes (its store read the checkpoint at
// 3) and then writes itself, after the database lost them (a crash with
// asynchronous commits: the checkpoint back at 2), does not fold on top
// of the gap: its first Update fails with ErrCheckpointLost, so its
// projector folds 3 again. Before, only what a store committed itself
// counted, and the new writer's commit 4 left 3's documents lost for good.
func TestAFollowerThatWritesSeesTheCheckpointItFollowedLost(t *testing.T) {
	url := pgtest.URL(t)
	leader, follower := openURL(t, url), openURL(t, url)
	for seq := uint64(1); seq <= 3; seq++ {
		if err := leader.Update(ctx, seq, func(tx projections.Tx) error { return tx.Put("c", "k", seq) }); err != nil {
			t.Fatal(err)
		}
	}
	if cp, err := follower.Checkpoint(ctx); err != nil || cp != 3 {
		t.Fatalf("the follower reads checkpoint %d: %v", cp, err)
	}
	if _, err := follower.Pool().Exec(ctx, `UPDATE checkpoints SET seq = 2`); err != nil { // the database lost 3
		t.Fatal(err)
	}
	err := follower.Update(ctx, 4, func(tx projections.Tx) error { return tx.Put("c", "k", 4) })
	if !errors.Is(err, postgres.ErrCheckpointLost) {
		t.Fatalf("the new writer's Update past a checkpoint it saw lost: %v", err)
	}
	if err := follower.Update(ctx, 3, func(tx projections.Tx) error { return tx.Put("c", "k", 3) }); err != nil {
		t.Fatalf("folding again from the checkpoint: %v", err)
	}
}

func TestCommitsAreAsynchronousUnlessTheURLSaysOtherwise(t *testing.T) {
	url := pgtest.URL(t)
	for _, c := range []struct{ url, want string }{{url, "off"}, {url + "&synchronous_commit=on", "on"}} {
		s := openURL(t, c.url)
		var got string
		if err := s.Pool().QueryRow(ctx, `SHOW synchronous_commit`).Scan(&got); err != nil || got != c.want {
			t.Errorf("synchronous_commit %q, want %q: %v", got, c.want, err)
		}
	}
}

// The log binding lives with the checkpoint in the database: a reopened
// store (a restarted engine) is bound as before, and Reset empties the read
// models and unbinds them.
func TestBindingSurvivesReopenAndResetEmpties(t *testing.T) {
	url := pgtest.URL(t)
	s := openURL(t, url)
	if _, err := s.Bind(ctx, "01LOGA"); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if err := s.Update(ctx, seq, func(tx projections.Tx) error { return tx.Put("c", fmt.Sprint(seq), seq) }); err != nil {
			t.Fatal(err)
		}
	}
	reopened := openURL(t, url)
	if id, err := reopened.LogID(ctx); err != nil || id != "01LOGA" {
		t.Fatalf("reopened store bound to %q: %v", id, err)
	}
	if got, err := reopened.Bind(ctx, "01LOGB"); err != nil || got != "01LOGA" {
		t.Fatalf("Bind(01LOGB) = %q, %v", got, err)
	}
	n, err := reopened.Reset(ctx)
	if err != nil || n != 3 {
		t.Fatalf("Reset removed %d documents: %v", n, err)
	}
	for _, st := range []*postgres.Store{s, reopened} {
		id, err := st.LogID(ctx)
		cp, cerr := st.Checkpoint(ctx)
		c, nerr := st.Count(ctx, "c", "")
		if err != nil || cerr != nil || nerr != nil || id != "" || cp != 0 || c != 0 {
			t.Fatalf("after Reset: log %q, checkpoint %d, %d documents (%v %v %v)", id, cp, c, err, cerr, nerr)
		}
	}
	// The store that reset folds again from the start; the other, which
	// committed up to 3, sees the checkpoint behind it and stops.
	if err := reopened.Update(ctx, 1, func(tx projections.Tx) error { return tx.Put("c", "1", 1) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, 4, func(tx projections.Tx) error { return nil }); !errors.Is(err, postgres.ErrCheckpointLost) {
		t.Fatalf("Update of a store the database was reset under: %v", err)
	}
}

// A writer whose client goes silent in the middle of an Update (a leader
// cut from the database, or paused) does not keep the checkpoint's row lock
// for as long as it stays silent: the server ends its transaction after
// IdleInTransaction, and the next writer (the node that leads now) folds.
// Before, the server kept the transaction open, and the new leader's
// Update waited on the lock until the cut healed: the short fault run's
// deployment acknowledged 0 writes in the cut's last 6 s while every
// write waited for read models nobody could write (docs/faults.md).
func TestASilentWriterDoesNotHoldTheCheckpoint(t *testing.T) {
	url := pgtest.URL(t)
	old, next := openURL(t, url), openURL(t, url)
	if err := old.Update(ctx, 1, func(tx projections.Tx) error { return tx.Put("c", "k", 1) }); err != nil {
		t.Fatal(err)
	}
	inTx, silent := make(chan struct{}), make(chan struct{})
	oldDone := make(chan error, 1)
	go func() {
		oldDone <- old.Update(ctx, 2, func(tx projections.Tx) error {
			if err := tx.Put("c", "k", 2); err != nil {
				return err
			}
			close(inTx)
			<-silent // the client sends nothing more: cut off, paused
			return nil
		})
	}()
	defer func() {
		select {
		case <-silent:
		default:
			close(silent)
		}
	}()
	<-inTx
	began := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 2*postgres.IdleInTransaction+3*time.Second)
	defer cancel()
	if err := next.Update(wctx, 3, func(tx projections.Tx) error { return tx.Put("c", "k", 3) }); err != nil {
		t.Fatalf("the next writer's Update while the old one is silent in its transaction, after %v: %v", time.Since(began).Round(time.Millisecond), err)
	}
	t.Logf("the next writer folded after %v", time.Since(began).Round(time.Millisecond))
	close(silent)
	if err := <-oldDone; err == nil {
		t.Fatal("the silent writer's Update committed after the server ended its transaction")
	}
	var k int
	if ok, err := next.Get(ctx, "c", "k", &k); err != nil || !ok || k != 3 {
		t.Fatalf("k = %d (%v %v), want 3", k, ok, err)
	}
	// The old writer's store works again on a new session: it skips what the
	// checkpoint holds.
	if err := old.Update(ctx, 3, func(tx projections.Tx) error { return tx.Put("c", "k", 33) }); err != nil {
		t.Fatal(err)
	}
	if cp, err := old.Checkpoint(ctx); err != nil || cp != 3 {
		t.Fatalf("checkpoint %d: %v", cp, err)
	}
}

func TestIdleTransactionsEndUnlessTheURLSaysOtherwise(t *testing.T) {
	url := pgtest.URL(t)
	for _, c := range []struct{ url, want string }{{url, "2s"}, {url + "&idle_in_transaction_session_timeout=0", "0"}} {
		s := openURL(t, c.url)
		var got string
		if err := s.Pool().QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil || got != c.want {
			t.Errorf("idle_in_transaction_session_timeout %q, want %q: %v", got, c.want, err)
		}
	}
}

// The store's sessions tell the server to find a client gone from the
// network within seconds (keepalives after 1 s, unacknowledged data for
// 3 s), so a writer cut partway through a message cannot hold the
// checkpoint's lock until TCP gives up; a URL's own setting stands.
func TestSessionsFindADeadClientInSeconds(t *testing.T) {
	url := pgtest.URL(t)
	show := func(s *postgres.Store, name string) string {
		var v string
		if err := s.Pool().QueryRow(ctx, "SHOW "+name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	s := openURL(t, url)
	for name, want := range map[string]string{"tcp_keepalives_idle": "1", "tcp_keepalives_interval": "1", "tcp_keepalives_count": "2", "tcp_user_timeout": "3000"} {
		if got := show(s, name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	own := openURL(t, url+sep+"tcp_keepalives_idle=30")
	if got := show(own, "tcp_keepalives_idle"); got != "30" {
		t.Errorf("the URL's tcp_keepalives_idle = %s, want its own 30", got)
	}
}
