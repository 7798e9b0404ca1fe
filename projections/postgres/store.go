// Package postgres is the PostgreSQL projections.Store, through pgx/v5.
//
// Documents live in one table, docs(coll, key, doc json), keyed by
// (coll, key) with keys in byte order (COLLATE "C"), so List is a keyset
// read on the primary key in the order Go compares strings. Update buffers
// the transaction's writes in memory (Tx.Get reads the buffer first) and
// sends them at the end in one round trip, together with the checkpoint,
// then commits: a batch of commits costs a few round trips, not one per write.
// Between Updates the store keeps the documents it last wrote or read, and
// trusts them only while the checkpoint is still the one it committed, so
// another writer of the same projection invalidates them; all writes must go
// through Update. Reads outside Update see committed data only.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc/engine/projections"
	schema "github.com/svc/engine/schema/postgres"
)

// ErrCheckpointLost is returned by Update when the database's checkpoint is
// behind one this store committed: the database lost commits (a crash with
// asynchronous commit, a restore, a failover to a lagging replica). The
// projector must restart from Checkpoint (it does: the error is its store's,
// projections.ErrStore); it is returned once, and the store's next Update
// builds on the database's checkpoint.
var ErrCheckpointLost = errors.New("postgres: checkpoint behind a committed update; restart the projector")

// Projection is the checkpoint name Open uses; it never changes, since it
// names the read models' durable position in the log.
const Projection = "core"

// minConns is the pool size unless the URL sets pool_max_conns.
const minConns = 16

// pageSize bounds the rows one List round trip reads; List reads page by page
// and calls its callback with no connection held, so the callback may read the
// store again.
const pageSize = 256

// Store is a projections.Store in PostgreSQL. It is safe for concurrent use;
// concurrent Updates serialize on the checkpoint row.
type Store struct {
	pool  *pgxpool.Pool
	name  string
	wmu   sync.Mutex // serializes this process's Updates; guards the fields below
	cache cache      // its own lock: Get reads it without wmu
	// visible is held for writing from a transaction's commit until the
	// cache holds it, and for reading by a sole writer's Get that misses the
	// cache: such a read never sees the database ahead of the cache, so a
	// reader's next hit is never older than what it just read.
	visible   sync.RWMutex
	committed uint64 // the last checkpoint this store committed
	// seen is the highest checkpoint this store read (Checkpoint). A node
	// that followed another's writes passed its listeners that far, so a
	// database that lost them (a crash with asynchronous commits) is as
	// much behind this store as behind one that committed them: when the
	// follower becomes the writer, its Update finds the checkpoint behind
	// seen and fails with ErrCheckpointLost, and its projector folds the
	// lost commits again instead of folding on top of the gap.
	seen atomic.Uint64
	sole atomic.Bool // this process is the only writer (SetSoleWriter)
}

// ConnectTimeout bounds opening a connection to PostgreSQL.
const ConnectTimeout = 2 * time.Second

// IdleInTransaction is how long the server keeps a transaction of the
// store's sessions open while its client sends nothing
// (idle_in_transaction_session_timeout), unless url sets it. An Update
// holds the checkpoint's row lock until it commits; a writer cut from the
// server or paused in the middle of one is not gone for the server, which
// would keep its transaction, and the lock, until the client came back,
// and every other node's Update (the leader that took over its writes)
// would wait on it. Ended by the server, the silent writer's Update fails
// when it comes back and its projector folds again from the checkpoint.
// No transaction of the store waits on its client between statements for
// anywhere near this long.
const IdleInTransaction = 2 * time.Second

// deadPeerSettings make the server find a session's client gone within
// about 3 s when it stops answering at the network (a cut drops packets
// silently), unless the URL sets them: keepalive probes after a second of
// silence, and data the server sent left unacknowledged for 3 s. A writer
// cut while the server waits for the rest of its message, or while the
// server sends it an answer, is not idle in a transaction
// (IdleInTransaction), and without these its transaction, and the
// checkpoint's lock, would stay until TCP gave up, many minutes later.
var deadPeerSettings = [...][2]string{
	{"tcp_keepalives_idle", "1"}, {"tcp_keepalives_interval", "1"}, {"tcp_keepalives_count", "2"}, {"tcp_user_timeout", "3000"},
}

// deadPeers sets deadPeerSettings on each new session the URL does not set
// them for. A server that does not support one (tcp_user_timeout is
// Linux's) refuses it, and the session goes on without it.
func deadPeers(set map[string]string) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, c *pgx.Conn) error {
		for _, kv := range deadPeerSettings {
			if _, ok := set[kv[0]]; !ok {
				_, _ = c.Exec(ctx, "SET "+kv[0]+" = "+kv[1])
			}
		}
		return nil
	}
}

// Open connects to url, applies the migrations of schema/postgres and returns
// the store of the projection named Projection. Tables are created in the
// first schema of the connection's search_path (e.g. ?search_path=s in url);
// the pool holds at least 16 connections unless url sets pool_max_conns.
//
// Commits are asynchronous (synchronous_commit=off) unless url sets
// synchronous_commit: an Update does not wait for the WAL flush, which costs
// milliseconds per transaction on real disks. The read models stay
// consistent with their checkpoint, and the log is the source of truth: a
// database crash loses at most the last fraction of a second of Updates,
// which the projector folds again from the log from the checkpoint (an
// Update failing on the broken connection stops the projector, which the
// engine runs again until the store answers). A store
// that sees the checkpoint behind what it committed itself fails with
// ErrCheckpointLost rather than fold on top of a gap.
//
// A transaction whose client sends nothing for IdleInTransaction is ended
// by the server unless url sets idle_in_transaction_session_timeout.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") && cfg.MaxConns < minConns {
		cfg.MaxConns = minConns // HTTP reads and SSE frames read concurrently
	}
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > ConnectTimeout {
		cfg.ConnConfig.ConnectTimeout = ConnectTimeout // a request fails fast while the server is down
	}
	if _, set := cfg.ConnConfig.RuntimeParams["synchronous_commit"]; !set {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(IdleInTransaction.Milliseconds(), 10)
	}
	cfg.AfterConnect = deadPeers(cfg.ConnConfig.RuntimeParams)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s, err := New(ctx, pool, Projection)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// New migrates the database behind pool and returns the store of the named
// projection. The store owns pool: Close closes it.
func New(ctx context.Context, pool *pgxpool.Pool, name string) (*Store, error) {
	ms, err := LoadMigrations(schema.Migrations)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if _, err := Migrate(ctx, pool, ms); err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO checkpoints (name, seq) VALUES ($1, 0) ON CONFLICT (name) DO NOTHING`, name); err != nil {
		return nil, fmt.Errorf("postgres: checkpoint: %w", err)
	}
	s := &Store{pool: pool, name: name}
	s.cache.reset()
	return s, nil
}

// Pool is the store's connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close implements projections.Store; it closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Checkpoint implements projections.Store.
func (s *Store) Checkpoint(ctx context.Context) (uint64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, `SELECT seq FROM checkpoints WHERE name = $1`, s.name).Scan(&seq); err != nil {
		return 0, fmt.Errorf("%w: postgres: checkpoint: %w", projections.ErrUnavailable, err)
	}
	for cp := uint64(seq); ; {
		old := s.seen.Load()
		if cp <= old || s.seen.CompareAndSwap(old, cp) {
			break
		}
	}
	return uint64(seq), nil
}

// LogID implements projections.Store.
func (s *Store) LogID(ctx context.Context) (string, error) {
	var id *string
	if err := s.pool.QueryRow(ctx, `SELECT log_id FROM checkpoints WHERE name = $1`, s.name).Scan(&id); err != nil {
		return "", fmt.Errorf("postgres: log id: %w", err)
	}
	if id == nil {
		return "", nil
	}
	return *id, nil
}

// Bind implements projections.Store: one statement, so nodes starting at once
// on one database bind it to one log between them.
func (s *Store) Bind(ctx context.Context, logID string) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `UPDATE checkpoints SET log_id = coalesce(log_id, nullif($2, ''))
		WHERE name = $1 RETURNING coalesce(log_id, '')`, s.name, logID).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("postgres: bind to log %s: %w", logID, err)
	}
	return id, nil
}

// Reset empties the read models: every document, and every projection's
// checkpoint and log binding, in one transaction; the next start folds the
// log it meets into them from its first commit. No engine may be running on
// the database meanwhile (one that is fails its next Update with
// ErrCheckpointLost). It returns how many documents it removed.
func (s *Store) Reset(ctx context.Context) (int64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The checkpoint rows first: an Update running meanwhile holds them.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM checkpoints FOR UPDATE`); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM docs`).Scan(&n); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `TRUNCATE docs`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE checkpoints SET seq = 0, log_id = NULL`)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: reset: %w", err)
	}
	s.cache.reset()
	s.committed = 0
	s.seen.Store(0)
	return n, nil
}

type docKey struct{ coll, key string }

type entryState uint8

const (
	stateClean   entryState = iota // read from the database, unchanged
	stateAbsent                    // read from the database: no such document
	statePut                       // written in this transaction
	stateDeleted                   // deleted in this transaction
)

// entry is one document as the transaction knows it: as read (doc, hidden,
// decoded on every Get) or as Put (val, which later Gets copy as the memory
// store does, without decoding). A Put value is encoded at flush, once,
// however often the transaction rewrote it.
type entry struct {
	state       entryState
	doc, hidden []byte
	val         reflect.Value // statePut: a copy of the value
	// fresh: put by Insert, whose key no earlier commit wrote (nor this
	// transaction's Puts before it); flush copies such documents in
	// (COPY) instead of upserting them.
	fresh bool
}

// tx buffers one Update's reads and writes; it is used by one goroutine.
type tx struct {
	from  uint64 // the checkpoint at the transaction's start
	ctx   context.Context
	db    pgx.Tx
	buf   map[docKey]*entry
	cache *cache
}

func (t *tx) Get(coll, key string, v any) (bool, error) {
	k := docKey{coll, key}
	e, ok := t.buf[k]
	if !ok {
		e, ok = t.cache.get(k)
		if ok {
			t.buf[k] = e
		}
	}
	if !ok {
		e = &entry{}
		err := t.db.QueryRow(t.ctx, `SELECT doc, hidden FROM docs WHERE coll = $1 AND key = $2`, coll, key).Scan(&e.doc, &e.hidden)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			e.state = stateAbsent
		case err != nil:
			return false, fmt.Errorf("%w: postgres: get %s/%s: %w", projections.ErrUnavailable, coll, key, err)
		}
		t.buf[k] = e
	}
	return e.read(k, v)
}

// read is Get of the document e holds for k: not found when absent or
// deleted, else copied into v.
func (e *entry) read(k docKey, v any) (bool, error) {
	if e.state == stateAbsent || e.state == stateDeleted {
		return false, nil
	}
	dst := reflect.ValueOf(v)
	if dst.Kind() != reflect.Pointer || dst.IsNil() {
		return false, fmt.Errorf("postgres: decode into %T: not a pointer", v)
	}
	if err := e.into(dst, v); err != nil {
		return false, fmt.Errorf("%w: postgres: get %s/%s: %w", projections.ErrUnavailable, k.coll, k.key, err)
	}
	return true, nil
}

// into copies the document into v (dst is v's reflect.Value): a Put value
// of v's type as is, as the memory store does, else through its stored form.
// It never changes the entry, which readers share.
func (e *entry) into(dst reflect.Value, v any) error {
	if e.val.IsValid() && e.val.Type() == dst.Elem().Type() {
		dst.Elem().Set(e.val)
		return nil
	}
	doc, hidden := e.doc, e.hidden
	if doc == nil { // Put as another type: go through the stored form
		var err error
		if doc, hidden, err = encode(e.val.Interface()); err != nil {
			return err
		}
	}
	return decode(doc, hidden, v)
}

// From implements projections.Tx.
func (t *tx) From() uint64 { return t.from }

func (t *tx) Put(coll, key string, v any) error {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if !rv.IsValid() || rv.Kind() == reflect.Pointer {
		return fmt.Errorf("postgres: put %s/%s: nil value", coll, key)
	}
	k := docKey{coll, key}
	// A rewrite of a document this transaction inserted is still new to
	// the database.
	fresh := false
	if e, ok := t.buf[k]; ok && e.fresh {
		fresh = true
	}
	t.buf[k] = &entry{state: statePut, val: reflect.ValueOf(rv.Interface()), fresh: fresh}
	return nil
}

// Insert is Put of a document whose key no earlier commit wrote
// (projections.Insert), copied in at flush; a key this transaction read as
// existing, deleted or Put is written as Put.
func (t *tx) Insert(coll, key string, v any) error {
	k := docKey{coll, key}
	e, known := t.buf[k]
	if known && e.state != stateAbsent && !e.fresh {
		return t.Put(coll, key, v)
	}
	if err := t.Put(coll, key, v); err != nil {
		return err
	}
	t.buf[k].fresh = true
	return nil
}

func (t *tx) Delete(coll, key string) error {
	k := docKey{coll, key}
	if e, ok := t.buf[k]; ok && (e.state == stateAbsent || e.fresh) {
		t.buf[k] = &entry{state: stateAbsent} // known not to exist, or inserted by this transaction only
		return nil
	}
	t.buf[k] = &entry{state: stateDeleted}
	return nil
}

const (
	upsertSQL = `INSERT INTO docs (coll, key, doc, hidden)
		SELECT * FROM unnest($1::text[], $2::text[], $3::json[], $4::json[])
		ON CONFLICT (coll, key) DO UPDATE SET doc = EXCLUDED.doc, hidden = EXCLUDED.hidden`
	deleteSQL = `DELETE FROM docs d USING unnest($1::text[], $2::text[]) AS x(coll, key)
		WHERE d.coll = x.coll AND d.key = x.key`
)

// errFreshTaken is a COPY of inserted documents that met a key already
// taken: the insert's promise did not hold (see projections.Insert), and the
// transaction is written again with upserts only.
var errFreshTaken = errors.New("postgres: an inserted document's key is taken")

// uniqueViolation is PostgreSQL's SQLSTATE unique_violation.
const uniqueViolation = "23505"

// flush sends the buffered writes and the new checkpoint: inserted documents
// by COPY when copyFresh (about half the server's work of an upsert a row),
// the others in one batch of statements.
func (t *tx) flush(name string, seq uint64, copyFresh bool) error {
	keys := make([]docKey, 0, len(t.buf))
	for k, e := range t.buf {
		if e.state == statePut || e.state == stateDeleted {
			keys = append(keys, k)
		}
	}
	// Key order: writers touching the same rows lock them in one order.
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].coll != keys[j].coll {
			return keys[i].coll < keys[j].coll
		}
		return keys[i].key < keys[j].key
	})
	var pc, pk, dc, dk []string
	var docs, hidden [][]byte
	var fresh [][]any
	for _, k := range keys {
		e := t.buf[k]
		if e.state == statePut {
			doc, hid, err := encode(e.val.Interface())
			if err != nil {
				return fmt.Errorf("put %s/%s: %w", k.coll, k.key, err)
			}
			if e.fresh && copyFresh {
				row := []any{k.coll, k.key, doc, nil}
				if hid != nil {
					row[3] = hid
				}
				fresh = append(fresh, row)
				continue
			}
			pc, pk = append(pc, k.coll), append(pk, k.key)
			docs, hidden = append(docs, doc), append(hidden, hid)
		} else {
			dc, dk = append(dc, k.coll), append(dk, k.key)
		}
	}
	if len(fresh) > 0 {
		_, err := t.db.CopyFrom(t.ctx, pgx.Identifier{"docs"}, []string{"coll", "key", "doc", "hidden"}, pgx.CopyFromRows(fresh))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == uniqueViolation {
			return fmt.Errorf("%w: %w", errFreshTaken, err)
		}
		if err != nil {
			return err
		}
	}
	b := &pgx.Batch{}
	if len(dc) > 0 {
		b.Queue(deleteSQL, dc, dk)
	}
	if len(pc) > 0 {
		b.Queue(upsertSQL, pc, pk, docs, hidden)
	}
	b.Queue(`UPDATE checkpoints SET seq = $2 WHERE name = $1`, name, int64(seq))
	return t.db.SendBatch(t.ctx, b).Close()
}

// Update implements projections.Store: fn's writes and the checkpoint commit
// together or not at all; a seq at or below the checkpoint is skipped.
func (s *Store) Update(ctx context.Context, seq uint64, fn func(projections.Tx) error) error {
	if seq > math.MaxInt64 {
		return fmt.Errorf("postgres: sequence %d out of range", seq)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err := s.update(ctx, seq, fn, true)
	if errors.Is(err, errFreshTaken) {
		err = s.update(ctx, seq, fn, false)
	}
	return err
}

// update is one attempt of Update; copyFresh: inserted documents by COPY.
func (s *Store) update(ctx context.Context, seq uint64, fn func(projections.Tx) error, copyFresh bool) error {
	db, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	defer db.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	var cp int64
	if err := db.QueryRow(ctx, `SELECT seq FROM checkpoints WHERE name = $1 FOR UPDATE`, s.name).Scan(&cp); err != nil {
		return fmt.Errorf("postgres: checkpoint: %w", err)
	}
	if lost := max(s.committed, s.seen.Load()); uint64(cp) < lost {
		s.cache.reset()
		s.committed = uint64(cp) // the projector folds again from here
		s.seen.Store(uint64(cp))
		return fmt.Errorf("%w: at %d, committed or seen %d", ErrCheckpointLost, cp, lost)
	}
	if seq <= uint64(cp) {
		return nil
	}
	if s.cache.at() != uint64(cp) {
		s.cache.reset() // written by someone else since, or never
	}
	t := &tx{from: uint64(cp), ctx: ctx, db: db, buf: map[docKey]*entry{}, cache: &s.cache}
	if err := fn(t); err != nil {
		return err
	}
	if err := t.flush(s.name, seq, copyFresh); err != nil {
		return fmt.Errorf("postgres: write up to %d: %w", seq, err)
	}
	s.visible.Lock()
	defer s.visible.Unlock()
	if err := db.Commit(ctx); err != nil {
		s.cache.reset()
		return fmt.Errorf("postgres: commit up to %d: %w", seq, err)
	}
	s.cache.commit(seq, t.buf)
	s.committed = seq
	return nil
}

// SetSoleWriter tells the store whether this process is the projection's
// only writer (one engine on its database; not a node of several, whose
// leader writes). While it is, Get answers documents this store committed
// or read since its last commit from memory: they are what the database
// holds at the store's checkpoint, which no one else moves. An Update that
// finds the checkpoint moved by someone else drops them all.
func (s *Store) SetSoleWriter(on bool) {
	s.sole.Store(on)
	if !on {
		s.cache.reset()
	}
}

// holdVisible is taken by a read of the database while this store is the
// sole writer, and released by the func it returns: no commit lands between
// the database and the cache meanwhile (see visible), so what the read sees
// is never newer than what a later Get answers from the cache.
func (s *Store) holdVisible() (release func()) {
	if !s.sole.Load() {
		return func() {}
	}
	s.visible.RLock()
	return s.visible.RUnlock
}

// Get implements projections.Store.
func (s *Store) Get(ctx context.Context, coll, key string, v any) (bool, error) {
	k := docKey{coll, key}
	var at uint64
	if s.sole.Load() {
		var e *entry
		var ok bool
		if e, at, ok = s.cache.lookup(k); ok {
			return e.read(k, v)
		}
		defer s.holdVisible()()
		if e, at, ok = s.cache.lookup(k); ok { // a commit since the first look
			return e.read(k, v)
		}
	}
	var doc, hidden []byte
	err := s.pool.QueryRow(ctx, `SELECT doc, hidden FROM docs WHERE coll = $1 AND key = $2`, coll, key).Scan(&doc, &hidden)
	if errors.Is(err, pgx.ErrNoRows) {
		if at != 0 {
			s.cache.fill(at, k, &entry{state: stateAbsent})
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: postgres: get %s/%s: %w", projections.ErrUnavailable, coll, key, err)
	}
	if at != 0 {
		s.cache.fill(at, k, &entry{doc: doc, hidden: hidden})
	}
	return true, decode(doc, hidden, v)
}

// prefixEnd is the least string above every string that starts with p, or ""
// when there is none: p with its last rune incremented (UTF-8 preserves code
// point order byte-wise), after dropping trailing U+10FFFF runes.
func prefixEnd(p string) string {
	for p != "" {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		if r == utf8.RuneError && size <= 1 {
			// Not UTF-8; PostgreSQL text cannot hold it, so neither can a key.
			continue
		}
		switch {
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF:
			r = 0xE000 // skip the surrogates
		default:
			r++
		}
		return p + string(r)
	}
	return ""
}

// where renders the conditions selecting prefix and, with after, the keys
// past after in the scan direction; args start with coll.
func where(coll, prefix string, after *string, reverse bool) (string, []any) {
	var sb strings.Builder
	args := []any{coll}
	sb.WriteString("coll = $1")
	if prefix != "" {
		args = append(args, prefix)
		fmt.Fprintf(&sb, " AND key >= $%d", len(args))
		if end := prefixEnd(prefix); end != "" {
			args = append(args, end)
			fmt.Fprintf(&sb, " AND key < $%d", len(args))
		}
	}
	if after != nil {
		args = append(args, *after)
		op := ">"
		if reverse {
			op = "<"
		}
		fmt.Fprintf(&sb, " AND key %s $%d", op, len(args))
	}
	return sb.String(), args
}

type row struct {
	key         string
	doc, hidden []byte
}

// List implements projections.Store. It reads pageSize rows per query and
// calls fn after each page is read, so fn runs with no connection held.
func (s *Store) List(ctx context.Context, coll string, q projections.Query, fn func(string, func(any) error) error) error {
	return list(ctx, coll, q, fn, func(sql string, args []any) ([]row, error) { return s.listPage(ctx, sql, args) })
}

// list is List reading each page with read.
func list(ctx context.Context, coll string, q projections.Query, fn func(string, func(any) error) error,
	read func(sql string, args []any) ([]row, error)) error {
	var after *string
	if q.After != "" {
		a := q.After
		after = &a
	}
	order := "ASC"
	if q.Reverse {
		order = "DESC"
	}
	left := q.Limit
	for {
		n := pageSize
		if q.Limit > 0 && left < n {
			n = left
		}
		cond, args := where(coll, q.Prefix, after, q.Reverse)
		args = append(args, n)
		sql := fmt.Sprintf(`SELECT key, doc, hidden FROM docs WHERE %s ORDER BY key %s LIMIT $%d`, cond, order, len(args))
		page, err := read(sql, args)
		if err != nil {
			return fmt.Errorf("%w: postgres: list %s: %w", projections.ErrUnavailable, coll, err)
		}
		for _, x := range page {
			if err := fn(x.key, func(v any) error { return decode(x.doc, x.hidden, v) }); err != nil {
				return err
			}
		}
		if len(page) < n {
			return nil
		}
		if q.Limit > 0 {
			if left -= len(page); left <= 0 {
				return nil
			}
		}
		last := page[len(page)-1].key
		after = &last
	}
}

// listPage reads one page of List; fn runs after, with no lock or
// connection held, so it may read the store again.
func (s *Store) listPage(ctx context.Context, sql string, args []any) ([]row, error) {
	defer s.holdVisible()()
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return collectRows(rows)
}

// collectRows reads a page of List.
func collectRows(rows pgx.Rows) ([]row, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.key, &x.doc, &x.hidden)
		return x, err
	})
}

// Count implements projections.Store.
func (s *Store) Count(ctx context.Context, coll, prefix string) (int, error) {
	cond, args := where(coll, prefix, nil, false)
	defer s.holdVisible()()
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM docs WHERE `+cond, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count %s: %w", coll, err)
	}
	return int(n), nil
}

// View implements projections.Viewer: fn reads in one REPEATABLE READ, READ
// ONLY transaction, whose one snapshot sees the read models as of one
// Update (an Update commits its documents and its checkpoint together).
// The snapshot is taken by the view's first statement, a read of the
// checkpoint; a sole writer's commits wait meanwhile (holdVisible), so the
// view is never ahead of what a later Get answers from the cache. The
// view's reads go to the database, never to the cache, which may be ahead
// of the snapshot.
func (s *Store) View(ctx context.Context, fn func(projections.Store) error) error {
	db, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("%w: postgres: begin a view: %w", projections.ErrUnavailable, err)
	}
	defer db.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	v := &view{s: s, db: db}
	release := s.holdVisible()
	var seq int64
	err = db.QueryRow(ctx, `SELECT seq FROM checkpoints WHERE name = $1`, s.name).Scan(&seq)
	release()
	if err != nil {
		return fmt.Errorf("%w: postgres: view: checkpoint: %w", projections.ErrUnavailable, err)
	}
	v.seq = uint64(seq)
	if err := fn(v); err != nil {
		return err
	}
	return db.Commit(ctx) // nothing to write: it ends the snapshot
}

var _ projections.Viewer = (*Store)(nil)

// view is a Store reading through one REPEATABLE READ transaction (View);
// one goroutine uses it.
type view struct {
	s   *Store
	db  pgx.Tx
	seq uint64 // the checkpoint the snapshot is at
}

func (v *view) Update(context.Context, uint64, func(projections.Tx) error) error {
	return projections.ErrReadOnly
}

func (v *view) Checkpoint(context.Context) (uint64, error) { return v.seq, nil }

func (v *view) Get(ctx context.Context, coll, key string, dst any) (bool, error) {
	var doc, hidden []byte
	err := v.db.QueryRow(ctx, `SELECT doc, hidden FROM docs WHERE coll = $1 AND key = $2`, coll, key).Scan(&doc, &hidden)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: postgres: get %s/%s: %w", projections.ErrUnavailable, coll, key, err)
	}
	return true, decode(doc, hidden, dst)
}

// List reads as Store.List does, page by page; each page is read whole
// before fn sees it, so fn may read the view again.
func (v *view) List(ctx context.Context, coll string, q projections.Query, fn func(string, func(any) error) error) error {
	return list(ctx, coll, q, fn, func(sql string, args []any) ([]row, error) {
		rows, err := v.db.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		return collectRows(rows)
	})
}

func (v *view) Count(ctx context.Context, coll, prefix string) (int, error) {
	cond, args := where(coll, prefix, nil, false)
	var n int64
	if err := v.db.QueryRow(ctx, `SELECT count(*) FROM docs WHERE `+cond, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count %s: %w", coll, err)
	}
	return int(n), nil
}

func (v *view) LogID(ctx context.Context) (string, error) { return v.s.LogID(ctx) }

func (v *view) Bind(context.Context, string) (string, error) { return "", projections.ErrReadOnly }

func (v *view) Close() {}
