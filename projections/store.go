// Package projections folds commits into read models. Every read model lives in
// a Store, a small ordered document store with two implementations (memory and
// postgres) that pass one contract suite. A projection saves its checkpoint in
// the same transaction as its changes, so a crash never applies a commit twice
// or skips one; with the checkpoint a store keeps the id of the log it folds,
// so it is never read against another.
package projections

import (
	"context"
	"errors"
	"reflect"
	"sync"
)

// ErrNotFound is returned by typed reads for a missing record.
var ErrNotFound = errors.New("projections: not found")

// ErrUnavailable means the store could not be read: its server is down or
// unreachable. The gateway answers 503 store_unavailable with Retry-After.
var ErrUnavailable = errors.New("projections: store unavailable")

// Query selects documents of one collection in key order.
type Query struct {
	Prefix  string // only keys with this prefix
	After   string // only keys strictly after this one (strictly before when Reverse)
	Limit   int    // at most this many; 0: no limit
	Reverse bool   // descending key order
}

// Tx is one transaction of a Store. Values are JSON-encodable records, put
// as values or as pointers to them; Get decodes into v, which must be a
// pointer to the record's type. A pointer given to Put belongs to the store
// from then on: the caller must not change what it points to.
type Tx interface {
	// From is the checkpoint the transaction started at: a commit at or
	// below it is in the read models already (another node's projector put
	// it there) and must not be folded again.
	From() uint64
	Get(coll, key string, v any) (bool, error)
	Put(coll, key string, v any) error
	Delete(coll, key string) error
}

// Insert writes a document whose key no earlier commit wrote: a record the
// commit being folded creates (a new order, its place in the account's
// sequence, a fill). A store may write such documents more cheaply than Put
// (PostgreSQL: COPY rather than an upsert) and, should the key be taken
// after all, writes it as Put would. Within the transaction it reads and
// rewrites as a Put does.
func Insert(tx Tx, coll, key string, v any) error {
	if in, ok := tx.(interface {
		Insert(coll, key string, v any) error
	}); ok {
		return in.Insert(coll, key, v)
	}
	return tx.Put(coll, key, v)
}

// PacksOnPut is implemented by a Tx whose Put packs a Packable document
// into bytes of its own before it returns (the memory store): it keeps no
// pointer into the document, so a fold may hand it memory it reuses.
type PacksOnPut interface {
	Tx
	PacksOnPut()
}

// Store holds read models.
type Store interface {
	// Update runs fn in one transaction and advances the checkpoint to seq with it.
	// A seq at or below the checkpoint is skipped without calling fn.
	Update(ctx context.Context, seq uint64, fn func(Tx) error) error
	// Checkpoint is the last sequence applied (0: none).
	Checkpoint(ctx context.Context) (uint64, error)
	// Get reads one document into v.
	Get(ctx context.Context, coll, key string, v any) (bool, error)
	// List calls fn for each document selected by q, in key order; decode(v) reads it.
	List(ctx context.Context, coll string, q Query, fn func(key string, decode func(v any) error) error) error
	// Count counts the documents of coll with the prefix.
	Count(ctx context.Context, coll, prefix string) (int, error)
	// LogID is the id of the commit log the read models are folded from,
	// kept with the checkpoint ("" while the store is bound to no log).
	LogID(ctx context.Context) (string, error)
	// Bind binds a store bound to no log to the log logID, and returns the
	// id of the log the store is bound to after the call: logID, or the log
	// it was bound to before, which Bind never changes. Only emptying the
	// store (a rebuild) unbinds it.
	Bind(ctx context.Context, logID string) (string, error)
	Close()
}

// Viewer is a Store that reads under one snapshot. View calls fn with a
// read-only Store whose every read sees the read models as of one moment:
// no Update lands between two of its reads, so what fn reads in several
// reads (an account, its positions and its working orders) belongs to one
// commit, the one the documents' revisions name. fn reads through the view
// only, and returns before View does; the view's Update and Bind fail.
type Viewer interface {
	View(ctx context.Context, fn func(Store) error) error
}

// ErrReadOnly is the error of a write through a Viewer's view.
var ErrReadOnly = errors.New("projections: a view of the read models is read-only")

// View calls fn with s as of one moment (Viewer); a store that keeps no
// snapshots (a test's stub) is handed over as it is.
func View(ctx context.Context, s Store, fn func(Store) error) error {
	if v, ok := s.(Viewer); ok {
		return v.View(ctx, fn)
	}
	return fn(s)
}

// ListInto collects the documents selected by q as values of T. Each is
// decoded in its place in the slice answered, not copied there.
func ListInto[T any](ctx context.Context, s Store, coll string, q Query) ([]T, error) {
	var out []T
	err := s.List(ctx, coll, q, func(_ string, decode func(any) error) error {
		var zero T
		out = append(out, zero)
		if err := decode(&out[len(out)-1]); err != nil {
			out = out[:len(out)-1]
			return err
		}
		return nil
	})
	return out, err
}

// GetInto reads one document as a value of T, or ErrNotFound. A Store
// copies the document into the pointer it is given and keeps nothing of it
// (Tx, Store.Get), so GetInto reads into a T it reuses rather than one
// made for each read.
func GetInto[T any](ctx context.Context, s Store, coll, key string) (T, error) {
	v, ok, err := pooledGet[T](func(dst any) (bool, error) { return s.Get(ctx, coll, key, dst) })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return v, err
}

// TxGetInto is GetInto within a transaction: the document as a value of T
// and whether there is one, read into a T it reuses.
func TxGetInto[T any](tx Tx, coll, key string) (T, bool, error) {
	return pooledGet[T](func(dst any) (bool, error) { return tx.Get(coll, key, dst) })
}

// pooledGet reads with get into a T from its pool and answers a copy; the
// pooled T is emptied before it goes back, holding nothing the copy refers to.
func pooledGet[T any](get func(dst any) (bool, error)) (T, bool, error) {
	pool := readPool[T]()
	p := pool.Get().(*T)
	ok, err := get(p)
	v := *p
	var zero T
	*p = zero
	pool.Put(p)
	return v, ok, err
}

// readPools is GetInto's reusable values, a *sync.Pool of *T by T's type.
var readPools sync.Map

// readPool is the pool of GetInto's values of type T.
func readPool[T any]() *sync.Pool {
	t := reflect.TypeFor[T]()
	if p, ok := readPools.Load(t); ok {
		return p.(*sync.Pool)
	}
	p, _ := readPools.LoadOrStore(t, &sync.Pool{New: func() any { return new(T) }})
	return p.(*sync.Pool)
}
