// Package snapshot keeps aggregate snapshots in a JetStream key-value bucket
// named after the commit stream (eventlog.SnapshotBucket). A snapshot is one
// aggregate's whole state at a revision of the log (the stream sequence of
// its last commit), tied to the log's id, to the snapshot format and to the
// shape of the state it encodes. Snapshots only speed a start up; correctness
// never depends on them: a snapshot that cannot be used is ignored and its
// aggregate rebuilt from the log.
//
// The bucket also holds the mark: a log sequence W such that every
// aggregate of the snapshotted kinds with a commit at or below W has a
// snapshot in the bucket at a revision R with no commit of its subject in
// (R, W]. A start seeds the aggregates from their snapshots and replays the
// log from after W only.
//
// A state's lists that grow with its history (an account's clientOrderIds,
// references, idempotency keys and realized fills) are stored apart, in
// segments of SegmentLen elements under keys of their own: a segment is
// written once, when it fills, and every later snapshot names it by its
// digest, so a snapshot round encodes and writes what the aggregate added
// since its last one, never its whole history, and no history is too long
// for a snapshot (each value stays under the server's message size).
package snapshot

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync"

	gojson "github.com/goccy/go-json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/domain/parts"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
)

// Format is the version of a snapshot's envelope and of its encoding (the
// state's JSON, within the codec's decimal bounds, flate-compressed past
// CompressAbove; a Parted state's lists in segments). A snapshot of another
// format is ignored. 2: the lists in segments.
const Format = 2

// SegmentLen is how many elements of a list one segment holds.
const SegmentLen = 1024

// CompressAbove is the size of a state's JSON past which it is stored
// compressed.
const CompressAbove = 16 << 10

// markKey is the key of the mark.
const markKey = "mark"

// ErrTooLarge refuses a snapshot larger than the server takes in one
// message: its aggregate is rebuilt from the log at each start instead.
var ErrTooLarge = errors.New("snapshot: larger than the server takes in one message")

// Config opens a Store.
type Config struct {
	JS       jetstream.JetStream
	Stream   string // the commit stream: the bucket is eventlog.SnapshotBucket(Stream)
	Replicas int    // of the bucket: the commit stream's
	LogID    string // the log's identity (eventlog.Log.ID): snapshots of another log are never used
	MaxValue int    // the largest value the server takes (its max payload); 0: 1 MiB
}

// Store is the snapshot bucket of one log.
type Store struct {
	kv    jetstream.KeyValue
	logID string
	max   int

	mu   sync.Mutex
	revs map[string]uint64 // the bucket's revision of each key as last seen (0: none), for compare-and-set
}

// Open opens the bucket, creating it when missing.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.LogID == "" {
		return nil, errors.New("snapshot: the log has no id, and a snapshot must name the log it was taken from")
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.MaxValue <= 0 {
		cfg.MaxValue = 1 << 20
	}
	name := eventlog.SnapshotBucket(cfg.Stream)
	kc := jetstream.KeyValueConfig{Bucket: name, History: 1, Replicas: cfg.Replicas, Storage: jetstream.FileStorage,
		Description: "aggregate snapshots of stream " + cfg.Stream + " (engine/snapshot); they only speed a start up and may be deleted"}
	var kv jetstream.KeyValue
	err := eventlog.RetryTimeouts(ctx, func(ctx context.Context) (err error) {
		kv, err = cfg.JS.CreateOrUpdateKeyValue(ctx, kc)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: bucket %s: %w", name, err)
	}
	// The headers and subject take some of a message: keep 4 KiB for them.
	return &Store{kv: kv, logID: cfg.LogID, max: max(cfg.MaxValue-4096, 1024), revs: map[string]uint64{}}, nil
}

// header is a snapshot's envelope: the value is the header's JSON, a
// newline, then the state's JSON (compressed when Flate).
type header struct {
	Format int    `json:"format"`
	Log    string `json:"log"`
	Kind   string `json:"kind"`
	ID     string `json:"id"`
	Rev    uint64 `json:"rev"`
	Shape  string `json:"shape"`
	Flate  bool   `json:"flate,omitempty"`
	// Whole marks a snapshot without a state (one too large to store, or
	// that could not be encoded): its aggregate is rebuilt from its whole
	// subject, and the mark may still pass it.
	Whole bool `json:"whole,omitempty"`
}

// mark is the mark's value.
type mark struct {
	Format int    `json:"format"`
	Log    string `json:"log"`
	Seq    uint64 `json:"seq"`
}

// Key is the bucket's key of an aggregate: its kind, a dot, and its id in
// unpadded base64url (an id may hold characters a key may not).
func Key(kind, id string) string {
	return kind + "." + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// segKey is the bucket's key of segment k of an aggregate's list.
func segKey(kind, id, list string, k int) string {
	return Key(kind, id) + "." + list + "." + strconv.Itoa(k)
}

// segKind is the kind of a segment's key, if key is one.
func segKind(key string) (string, bool) {
	parts := strings.Split(key, ".")
	if len(parts) != 4 || parts[0] == "" || parts[2] == "" {
		return "", false
	}
	if _, err := strconv.Atoi(parts[3]); err != nil {
		return "", false
	}
	return parts[0], true
}

// parseKey is Key's inverse.
func parseKey(key string) (kind, id string, ok bool) {
	kind, enc, ok := strings.Cut(key, ".")
	if !ok || kind == "" {
		return "", "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(b) == 0 {
		return "", "", false
	}
	return kind, string(b), true
}

// Parted is a state whose snapshot comes in parts. SnapshotParts runs
// where the state is owned (its mailbox) and returns the head, which Marshal
// encodes there and then, and the lists that grow with the aggregate's
// history, each a slice that stays as it is whatever the state does next,
// encoded later outside the mailbox and stored in segments (Store.PutParts).
// The state's pointer type reads the lists back (JoinSnapshot) after the
// head. A state may return no lists: its head is then the whole of it.
type Parted interface {
	SnapshotParts() (head any, lists []parts.List)
}

// joiner reads a Parted state's lists back.
type joiner interface {
	JoinSnapshot(lists []parts.Joined) error
}

// Pending is a state's snapshot as Marshal took it: its head encoded, its
// lists (a Parted state's) not yet.
type Pending struct {
	head   []byte
	lists  []parts.List
	parted bool
}

// Marshal takes a state's snapshot where the state is owned (the
// aggregate's mailbox goroutine), which it holds for as long as this takes:
// a Parted state's head, else the whole state, encoded as JSON. Decimals
// outside the codec's bounds are an error. goccy/go-json writes what
// encoding/json writes in about half the time (an account's state of 2,000
// orders: 331 us against 674).
func Marshal(state any) (Pending, error) {
	p := Pending{}
	v := state
	if pt, ok := state.(Parted); ok {
		v, p.lists = pt.SnapshotParts()
		p.parted = true
	}
	b, err := gojson.Marshal(v)
	if err != nil {
		return Pending{}, fmt.Errorf("snapshot: encode %T: %w", state, err)
	}
	p.head = b
	return p, nil
}

// Segs is what a writer knows of one aggregate's stored segments: for each
// list, the digests of the segments its last stored snapshot names. The
// zero value knows none. One goroutine at a time uses it.
type Segs struct {
	lists map[string]segRun
}

// segRun is the digests of a list's segments first, first+1, ...
type segRun struct {
	first   int
	digests []string
}

// digest names a segment's JSON in the snapshot that refers to it.
func digest(b []byte) string {
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:16])
}

// partedBody is a Parted state's snapshot: its head and its lists.
type partedBody struct {
	Head  json.RawMessage `json:"head"`
	Lists []listRef       `json:"lists"`
}

// listRef is one list of a snapshot: the elements from Base on are Lead,
// then the segments First, First+1, ... (by digest), then Rest. Segment k
// holds the elements k*SegmentLen up to (k+1)*SegmentLen.
type listRef struct {
	Name  string          `json:"name"`
	Base  int             `json:"base"`
	Lead  json.RawMessage `json:"lead"`
	First int             `json:"first"`
	Segs  []string        `json:"segs"`
	Rest  json.RawMessage `json:"rest"`
}

// segment is one segment to store: its list, index and JSON.
type segment struct {
	list string
	k    int
	data []byte
}

// Encoded is a Pending made ready to store (PutParts): the value's body,
// the segments to store before it, and what the writer knows once they are.
type Encoded struct {
	body   []byte
	put    []segment
	next   map[string]segRun
	parted bool
}

// Encode makes p ready to store, anywhere (the lists never change): the
// whole state's JSON, or a Parted state's head and lists, with the full
// segments known does not hold encoded now and the rest inline.
func (p Pending) Encode(known *Segs) (Encoded, error) {
	if !p.parted {
		return Encoded{body: p.head}, nil
	}
	out := Encoded{next: map[string]segRun{}}
	refs := make([]listRef, 0, len(p.lists))
	for _, l := range p.lists {
		items := reflect.ValueOf(l.Items)
		if items.Kind() != reflect.Slice {
			return Encoded{}, fmt.Errorf("snapshot: list %s is a %T, not a slice", l.Name, l.Items)
		}
		part := func(from, to int) ([]byte, error) { // elements from..to of the whole list
			b, err := gojson.Marshal(items.Slice(from-l.Base, to-l.Base).Interface())
			if err != nil {
				return nil, fmt.Errorf("snapshot: encode list %s: %w", l.Name, err)
			}
			return b, nil
		}
		end := l.Base + items.Len()
		first := (l.Base + SegmentLen - 1) / SegmentLen // the first segment wholly from Base on
		last := end / SegmentLen                        // the segments before it are full
		ref := listRef{Name: l.Name, Base: l.Base, First: first}
		var err error
		if last <= first {
			if ref.Rest, err = part(l.Base, end); err != nil {
				return Encoded{}, err
			}
			refs = append(refs, ref)
			continue
		}
		if ref.Lead, err = part(l.Base, first*SegmentLen); err != nil {
			return Encoded{}, err
		}
		var had segRun
		if known != nil {
			had = known.lists[l.Name]
		}
		for k := first; k < last; k++ {
			if i := k - had.first; i >= 0 && i < len(had.digests) {
				ref.Segs = append(ref.Segs, had.digests[i])
				continue
			}
			b, err := part(k*SegmentLen, (k+1)*SegmentLen)
			if err != nil {
				return Encoded{}, err
			}
			ref.Segs = append(ref.Segs, digest(b))
			out.put = append(out.put, segment{list: l.Name, k: k, data: b})
		}
		if ref.Rest, err = part(last*SegmentLen, end); err != nil {
			return Encoded{}, err
		}
		out.next[l.Name] = segRun{first: first, digests: ref.Segs}
		refs = append(refs, ref)
	}
	b, err := json.Marshal(partedBody{Head: p.head, Lists: refs})
	if err != nil {
		return Encoded{}, fmt.Errorf("snapshot: %w", err)
	}
	out.body, out.parted = b, true
	return out, nil
}

// Snap is one usable snapshot read by Load.
type Snap struct {
	Kind, ID string
	Rev      uint64 // the log sequence the state is at
	body     []byte
	flate    bool
	log      string
	segs     map[string][]byte // the bucket's segments as Load read them, by key
}

// Decode reads the snapshot's state into v, a pointer to a state of its
// kind: a Parted state's head, then its lists (JoinSnapshot), each segment
// checked against the digest the snapshot names. It answers those segments:
// a writer that starts from them (PutParts) stores none of them again.
func (s Snap) Decode(v any) (Segs, error) {
	body, err := inflated(s.body, s.flate)
	if err != nil {
		return Segs{}, fmt.Errorf("snapshot %s %s at %d: %w", s.Kind, s.ID, s.Rev, err)
	}
	j, parted := v.(joiner)
	if !parted {
		if err := events.UnmarshalStored(body, v); err != nil {
			return Segs{}, fmt.Errorf("snapshot %s %s at %d: decode: %w", s.Kind, s.ID, s.Rev, err)
		}
		return Segs{}, nil
	}
	var pb partedBody
	if err := json.Unmarshal(body, &pb); err != nil || pb.Head == nil {
		return Segs{}, fmt.Errorf("snapshot %s %s at %d: not a head and lists: %v", s.Kind, s.ID, s.Rev, err)
	}
	if err := events.UnmarshalStored(pb.Head, v); err != nil {
		return Segs{}, fmt.Errorf("snapshot %s %s at %d: decode: %w", s.Kind, s.ID, s.Rev, err)
	}
	known := Segs{lists: map[string]segRun{}}
	lists := make([]parts.Joined, 0, len(pb.Lists))
	for _, l := range pb.Lists {
		jl := parts.Joined{Name: l.Name, Base: l.Base}
		if len(l.Lead) > 0 {
			jl.Parts = append(jl.Parts, l.Lead)
		}
		for i, d := range l.Segs {
			b, err := s.segment(l.Name, l.First+i, d)
			if err != nil {
				return Segs{}, fmt.Errorf("snapshot %s %s at %d: %w", s.Kind, s.ID, s.Rev, err)
			}
			jl.Parts = append(jl.Parts, b)
		}
		if len(l.Segs) > 0 {
			known.lists[l.Name] = segRun{first: l.First, digests: l.Segs}
		}
		if len(l.Rest) > 0 {
			jl.Parts = append(jl.Parts, l.Rest)
		}
		lists = append(lists, jl)
	}
	if err := j.JoinSnapshot(lists); err != nil {
		return Segs{}, fmt.Errorf("snapshot %s %s at %d: %w", s.Kind, s.ID, s.Rev, err)
	}
	return known, nil
}

// segment is the JSON of segment k of list, as the digest d names it.
func (s Snap) segment(list string, k int, d string) ([]byte, error) {
	v, ok := s.segs[segKey(s.Kind, s.ID, list, k)]
	if !ok {
		return nil, fmt.Errorf("segment %d of %s is missing", k, list)
	}
	h, body, err := parse(v)
	if err == nil && (h.Format != Format || h.Log != s.log) {
		err = fmt.Errorf("of format %d and log %s", h.Format, h.Log)
	}
	if err == nil {
		body, err = inflated(body, h.Flate)
	}
	if err == nil && digest(body) != d {
		err = errors.New("not the one the snapshot names")
	}
	if err != nil {
		return nil, fmt.Errorf("segment %d of %s: %w", k, list, err)
	}
	return body, nil
}

// inflated is b, decompressed when compressed.
func inflated(b []byte, compressed bool) ([]byte, error) {
	if !compressed {
		return b, nil
	}
	out, err := io.ReadAll(flate.NewReader(bytes.NewReader(b)))
	if err != nil {
		return nil, fmt.Errorf("inflate: %w", err)
	}
	return out, nil
}

// Ignored is a snapshot Load found and will not use: its aggregate must be
// rebuilt from the whole of its subject.
type Ignored struct {
	Kind, ID string
	Reason   string
}

// Loaded is what Load found.
type Loaded struct {
	// Mark is the mark's sequence; 0: none that holds for this log (every
	// aggregate then needs its whole history).
	Mark    uint64
	Snaps   []Snap
	Ignored []Ignored
}

// Load reads every snapshot in the bucket. shapes is the Shape of each kind
// the caller rebuilds; last is the log's last sequence. A snapshot is used
// when it is of this Format, of this log (its id), of the kind's shape and
// at a revision within the log; any other snapshot of such a kind is listed
// in Ignored, with a log line. Snapshots past the log's last sequence (the
// log was replaced by an older copy of itself) are deleted, and so is the
// mark then: they describe commits this log does not hold.
func (s *Store) Load(ctx context.Context, last uint64, shapes map[string]string) (Loaded, error) {
	w, err := s.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return Loaded{}, fmt.Errorf("snapshot: read the bucket: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var (
		out     Loaded
		m       mark
		markRev uint64
		future  []string
		segs    = map[string][]byte{}
	)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return Loaded{}, ctx.Err()
		case e = <-w.Updates():
		}
		if e == nil {
			break // every key's newest value has been delivered
		}
		key := e.Key()
		if kind, ok := segKind(key); ok {
			if _, rebuilt := shapes[kind]; rebuilt {
				segs[key] = e.Value()
			}
			continue
		}
		s.revs[key] = e.Revision()
		if key == markKey {
			if json.Unmarshal(e.Value(), &m) != nil {
				m = mark{}
			}
			markRev = e.Revision()
			continue
		}
		kind, id, ok := parseKey(key)
		if !ok {
			continue // not a key of ours
		}
		shape, rebuilt := shapes[kind]
		if !rebuilt {
			continue
		}
		ignore := func(reason string) {
			slog.Warn("snapshot ignored; the aggregate is rebuilt from the log", "kind", kind, "id", id, "reason", reason)
			out.Ignored = append(out.Ignored, Ignored{Kind: kind, ID: id, Reason: reason})
		}
		h, body, err := parse(e.Value())
		switch {
		case err != nil:
			ignore(err.Error())
		case h.Format != Format:
			ignore(fmt.Sprintf("format %d, this build reads %d", h.Format, Format))
		case h.Log != s.logID:
			ignore(fmt.Sprintf("taken from log %s, this log is %s", h.Log, s.logID))
		case h.Kind != kind || h.ID != id:
			ignore(fmt.Sprintf("holds %s %s under the key of %s %s", h.Kind, h.ID, kind, id))
		case h.Shape != shape:
			ignore(fmt.Sprintf("state shape %s, this build's is %s", h.Shape, shape))
		case h.Rev > last:
			ignore(fmt.Sprintf("at revision %d, past the log's last sequence %d", h.Rev, last))
			future = append(future, key)
		case h.Whole:
			out.Ignored = append(out.Ignored, Ignored{Kind: kind, ID: id, Reason: "no state stored (too large, or not encodable)"})
		default:
			out.Snaps = append(out.Snaps, Snap{Kind: kind, ID: id, Rev: h.Rev, body: body, flate: h.Flate, log: s.logID, segs: segs})
		}
	}
	switch {
	case markRev == 0:
	case m.Format != Format || m.Log != s.logID:
		slog.Warn("snapshot mark ignored: of another format or log; every aggregate is rebuilt from the whole log", "format", m.Format, "log", m.Log)
	case m.Seq > last || len(future) > 0:
		slog.Warn("snapshot mark ignored: the log ends before snapshots taken of it; every aggregate is rebuilt from the whole log",
			"mark", m.Seq, "lastSeq", last, "snapshotsPastTheEnd", len(future))
		future = append(future, markKey)
	default:
		out.Mark = m.Seq
	}
	for _, key := range future {
		if err := s.kv.Delete(ctx, key, jetstream.LastRevision(s.revs[key])); err != nil {
			return Loaded{}, fmt.Errorf("snapshot: delete %s, which the log does not reach: %w", key, err)
		}
		delete(s.revs, key)
	}
	return out, nil
}

// parse splits a value into its header and body.
func parse(v []byte) (header, []byte, error) {
	var h header
	head, body, ok := bytes.Cut(v, []byte{'\n'})
	if !ok {
		return h, nil, errors.New("no header")
	}
	if err := json.Unmarshal(head, &h); err != nil {
		return h, nil, fmt.Errorf("unreadable header: %v", err)
	}
	return h, body, nil
}

// Put stores the snapshot of aggregate kind/id at revision rev, state being
// what Marshal made of its state (nil: none, the aggregate is to be rebuilt
// from its whole subject; a state larger than the server takes is stored so
// too, and Put reports ErrTooLarge after storing), unless the bucket holds one of the same
// log at a later revision (or at rev, of the same shape): a snapshot is never
// replaced by an older one. Two writers race through the bucket's
// compare-and-set on the key's revision. It reports the revision the
// bucket's snapshot is at afterwards (rev or later).
func (s *Store) Put(ctx context.Context, kind, id string, rev uint64, shape string, state []byte) (uint64, error) {
	value, err := envelope(header{Format: Format, Log: s.logID, Kind: kind, ID: id, Rev: rev, Shape: shape, Whole: state == nil}, state)
	if err != nil {
		return 0, err
	}
	if len(value) > s.max {
		got, err := s.Put(ctx, kind, id, rev, shape, nil)
		if err != nil {
			return 0, err
		}
		return got, fmt.Errorf("%s %s at %d, %d bytes: %w", kind, id, rev, len(value), ErrTooLarge)
	}
	key := Key(kind, id)
	kept := rev
	err = s.casPut(ctx, key, value, func(cur []byte) bool {
		// Another writer moved the key: keep its snapshot when it is newer.
		c, _, perr := parse(cur)
		if perr == nil && c.Log == s.logID && (c.Rev > rev || c.Rev == rev && c.Shape == shape && c.Format == Format) {
			kept = c.Rev
			return true
		}
		return false
	})
	if err != nil {
		return 0, fmt.Errorf("snapshot: put %s %s at %d: %w", kind, id, rev, err)
	}
	return kept, nil
}

// PutParts stores enc, the snapshot Marshal took of aggregate kind/id at
// revision rev made ready with known (Pending.Encode): first the segments
// of its lists that known does not hold, then its value as Put does, then
// it deletes the segments of a list that the value no longer names
// (elements the state dropped). Once the value is stored, known holds the
// segments it names. A segment larger than the server takes is not stored:
// the aggregate is stored as none (ErrTooLarge), as Put does.
func (s *Store) PutParts(ctx context.Context, kind, id string, rev uint64, shape string, enc Encoded, known *Segs) (uint64, error) {
	for _, sg := range enc.put {
		if err := s.putSegment(ctx, kind, id, sg); err != nil {
			if errors.Is(err, ErrTooLarge) {
				if _, perr := s.Put(ctx, kind, id, rev, shape, nil); perr != nil {
					return 0, perr
				}
			}
			return 0, err
		}
	}
	var drop []string
	if known != nil && enc.parted {
		for name, had := range known.lists {
			now, named := enc.next[name]
			for k := had.first; k < had.first+len(had.digests) && (!named || k < now.first); k++ {
				drop = append(drop, segKey(kind, id, name, k))
			}
		}
	}
	got, err := s.Put(ctx, kind, id, rev, shape, enc.body)
	if err != nil {
		return got, err // the bucket's value still names what known holds
	}
	if known != nil && enc.parted {
		known.lists = enc.next
	}
	for _, key := range drop {
		if err := s.kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return got, fmt.Errorf("snapshot: delete %s, a segment no snapshot names: %w", key, err)
		}
	}
	return got, nil
}

// putSegment stores one segment under its key, with the envelope of a
// snapshot (its format, log and compression).
func (s *Store) putSegment(ctx context.Context, kind, id string, sg segment) error {
	value, err := envelope(header{Format: Format, Log: s.logID, Kind: kind, ID: id}, sg.data)
	if err != nil {
		return err
	}
	key := segKey(kind, id, sg.list, sg.k)
	if len(value) > s.max {
		return fmt.Errorf("%s, %d bytes: %w", key, len(value), ErrTooLarge)
	}
	if _, err := s.kv.Put(ctx, key, value); err != nil {
		return fmt.Errorf("snapshot: put %s: %w", key, err)
	}
	return nil
}

// envelope is a value of the bucket: h's JSON, a newline, then body,
// compressed past CompressAbove (h says so). parse is its inverse.
func envelope(h header, body []byte) ([]byte, error) {
	if len(body) > CompressAbove {
		body, h.Flate = deflate(body), true
	}
	head, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	value := make([]byte, 0, len(head)+1+len(body))
	return append(append(append(value, head...), '\n'), body...), nil
}

// errMoving is a key other writers kept moving through every attempt.
var errMoving = errors.New("the key kept moving under other writers")

// casPut writes value under key by compare-and-set on the key's revision as
// this store last knew it. When another writer moved the key, it reads the
// key again and stops if keep says the value there stands (newer than
// value), else tries again with the new revision, a few times.
func (s *Store) casPut(ctx context.Context, key string, value []byte, keep func(cur []byte) bool) error {
	for attempt := 0; attempt < 4; attempt++ {
		s.mu.Lock()
		known := s.revs[key]
		s.mu.Unlock()
		var kvRev uint64
		var err error
		if known == 0 {
			kvRev, err = s.kv.Create(ctx, key, value)
		} else {
			kvRev, err = s.kv.Update(ctx, key, value, known)
		}
		if err == nil {
			s.remember(key, kvRev)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return err
		}
		e, err := s.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			s.remember(key, 0)
			if e != nil {
				s.remember(key, e.Revision())
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("read it again: %w", err)
		}
		s.remember(key, e.Revision())
		if keep(e.Value()) {
			return nil
		}
	}
	return errMoving
}

func (s *Store) remember(key string, kvRev uint64) {
	s.mu.Lock()
	s.revs[key] = kvRev
	s.mu.Unlock()
}

// PutMark raises the mark to seq (see the package comment): a mark of this
// log at seq or later stays as it is.
func (s *Store) PutMark(ctx context.Context, seq uint64) error {
	value, err := json.Marshal(mark{Format: Format, Log: s.logID, Seq: seq})
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	err = s.casPut(ctx, markKey, value, func(cur []byte) bool {
		var c mark
		return json.Unmarshal(cur, &c) == nil && c.Format == Format && c.Log == s.logID && c.Seq >= seq
	})
	if err != nil {
		return fmt.Errorf("snapshot: put the mark at %d: %w", seq, err)
	}
	return nil
}

// flaters are flate writers to reuse: each holds about a megabyte of
// tables, which a round that compressed many values allocated again each
// time (a sixth of a snapshot round's CPU went to making them).
var flaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed) // a valid level: no error
	return w
}}

// deflate compresses b, fast.
func deflate(b []byte) []byte {
	var buf bytes.Buffer
	zw := flaters.Get().(*flate.Writer)
	zw.Reset(&buf)
	_, _ = zw.Write(b) // a bytes.Buffer takes every write
	_ = zw.Close()
	flaters.Put(zw)
	return buf.Bytes()
}
