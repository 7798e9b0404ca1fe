// Package cluster spreads the accounts of one deployment over its engine
// nodes. Accounts fall into a fixed number of partitions; each partition is
// owned by one node at a time under a lease in a JetStream key-value bucket
// (compare-and-set on the key's revision, expiry by the bucket's TTL). Nodes
// announce themselves in a second bucket; the partitions are spread over the
// live nodes by rendezvous hashing, so a join or a leave moves only the
// partitions it must. A node that stops renewing (killed, paused, cut off)
// loses its partitions when their leases expire, and it stops acting on them
// itself, by its own clock, before that. The per-account expected-sequence
// guard of the log stays the last word: a stale owner's append fails.
//
// One more lease, "leader", marks the node that runs the duties the cluster
// runs once (webhook delivery, the PostgreSQL projector).
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/engine/eventlog"
)

// Defaults of Config.
const (
	DefaultPartitions = 32
	DefaultTTL        = 2 * time.Second
)

var nodeName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// ValidNode reports whether name can name a node: 1-32 of a-z, 0-9 and '-',
// not starting with '-'.
func ValidNode(name string) error {
	if !nodeName.MatchString(name) {
		return fmt.Errorf("cluster: node name %q: want 1-32 characters of a-z, 0-9 and '-', not starting with '-'", name)
	}
	return nil
}

// Config shapes a node's membership.
type Config struct {
	Conn     *nats.Conn
	JS       jetstream.JetStream
	Name     string // the deployment's name on the server: buckets <Name>_NODES and <Name>_LEASES
	Node     string // this node
	Replicas int    // of the buckets
	// Partitions is how many partitions accounts fall into; every node of a
	// deployment must use the same number. 0: DefaultPartitions.
	Partitions int
	// TTL is how long a lease lives without renewal; it is renewed every TTL/4.
	// 0: DefaultTTL.
	TTL time.Duration
	// Acquired runs when this node starts owning partition p; Released when it
	// stops (before the lease is handed over, or once it was lost). Both run on
	// the membership goroutine, one at a time.
	Acquired func(p int)
	Released func(p int)
	// Lead runs while this node holds the leader lease; its ctx ends when the
	// lease is lost or the node leaves. It must return once ctx ends.
	Lead func(ctx context.Context)
	// Fit, if set, says whether this node can do the leader's duties now
	// (with PostgreSQL read models: it reaches the database and its
	// projector writes). A leader that is not fit hands the lease over when
	// another node is live (at most once per YieldEvery while it stays
	// unfit, so two unfit nodes do not pass it back and forth), and a node that is not fit takes a
	// free lease only after it stayed free for a TTL, so a fit node takes it
	// first. Nil: always fit.
	Fit func() bool
	// Metrics, if set, counts lease moves.
	Moved func(kind string)
}

// Cluster is one node's view of the deployment and its own leases.
type Cluster struct {
	cfg    Config
	nodes  jetstream.KeyValue
	leases jetstream.KeyValue

	mu      sync.RWMutex
	owners  []owner              // partition -> owner, as the lease bucket last said
	others  []time.Time          // partition -> when another node last renewed or handed over its lease
	held    []lease              // this node's leases by partition (rev 0: not held)
	live    []string             // live nodes, sorted (settle)
	since   map[string]time.Time // when each listed node was first listed without a break
	leader  lease                // this node's leader lease (rev 0: not held)
	yielded time.Time            // when this node last handed the leader lease over for being unfit
	vacant  time.Time            // when this node, unfit, first saw the leader lease free (zero: not seen free)
	lead    context.CancelFunc
	leadWG  sync.WaitGroup

	// The lease store's outage, as this node sees it: renewals that time out
	// (the bucket's stream is electing a leader) rather than being refused.
	downSince time.Time // zero: the last renewal reached the store
	tried     time.Time // the last renewal attempt

	stop   context.CancelFunc
	done   chan struct{}
	closed atomic.Bool
}

// MaxOutage bounds how long a node keeps acting on its leases while the
// lease store cannot be reached (a NATS election takes 4 to 9 s). Nobody can
// take a lease from a store that answers no one; a node that itself stopped
// (paused, cut off) makes no attempts and gets no grace; and the log's
// expected-sequence guard keeps two owners of the moment from both
// committing on one account.
const MaxOutage = 15 * time.Second

type owner struct {
	node    string
	expires time.Time
}

type lease struct {
	rev   uint64
	until time.Time // this node acts on the lease until then, by its own clock
}

type leaseValue struct {
	Node string `json:"node"`
}

// New checks cfg and opens (creating when missing) the two buckets.
func New(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := ValidNode(cfg.Node); err != nil {
		return nil, err
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = DefaultPartitions
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	c := &Cluster{cfg: cfg, owners: make([]owner, cfg.Partitions), others: make([]time.Time, cfg.Partitions), held: make([]lease, cfg.Partitions)}
	var err error
	if c.nodes, err = bucket(ctx, cfg, "NODES"); err != nil {
		return nil, err
	}
	if c.leases, err = bucket(ctx, cfg, "LEASES"); err != nil {
		return nil, err
	}
	return c, nil
}

func bucket(ctx context.Context, cfg Config, kind string) (jetstream.KeyValue, error) {
	name := cfg.Name + "_" + kind
	kc := jetstream.KeyValueConfig{Bucket: name, History: 1, TTL: cfg.TTL, Replicas: cfg.Replicas, Storage: jetstream.FileStorage,
		Description: "engine cluster " + kind + " (leases expire " + cfg.TTL.String() + " after their last renewal)"}
	var kv jetstream.KeyValue
	err := eventlog.RetryTimeouts(ctx, func(ctx context.Context) (err error) {
		kv, err = cfg.JS.CreateOrUpdateKeyValue(ctx, kc)
		return err
	})
	if err == nil {
		return kv, nil
	}
	return nil, fmt.Errorf("cluster: bucket %s: %w", name, err)
}

// Node is this node's name.
func (c *Cluster) Node() string { return c.cfg.Node }

// Partitions is the number of partitions.
func (c *Cluster) Partitions() int { return c.cfg.Partitions }

// Partition is the partition of an account id.
func Partition(id string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

// PartitionOf is the partition of an account id in this deployment.
func (c *Cluster) PartitionOf(id string) int { return Partition(id, c.cfg.Partitions) }

// Owns reports whether this node holds the lease of id's partition and may
// still act on it by its own clock.
func (c *Cluster) Owns(id string) bool { return c.OwnsPartition(c.PartitionOf(id)) }

// OwnsPartition is Owns for a partition.
func (c *Cluster) OwnsPartition(p int) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.valid(c.held[p], time.Now())
}

// valid reports whether a held lease may be acted on at now: before its
// time, or within MaxOutage of it while this node keeps trying (a tick
// within the last TTL) a store that does not answer. c.mu is held.
func (c *Cluster) valid(l lease, now time.Time) bool {
	if l.rev == 0 {
		return false
	}
	if now.Before(l.until) {
		return true
	}
	return !c.downSince.IsZero() && now.Sub(c.tried) < c.cfg.TTL && now.Before(l.until.Add(MaxOutage))
}

// Owner is the node holding the lease of id's partition as the lease bucket
// last said, while that lease is unexpired; "" when none.
func (c *Cluster) Owner(id string) string {
	p := c.PartitionOf(id)
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.valid(c.held[p], time.Now()) {
		return c.cfg.Node
	}
	o := c.owners[p]
	if o.node == "" || time.Now().After(o.expires) {
		return ""
	}
	return o.node
}

// Vacated is the moment from which the node that owned partition p before
// this one may no longer have acted on its accounts: a TTL before the last
// renewal or hand-over of its lease that this node saw (the renewal proves
// it alive then; the TTL covers the work it had in hand). Zero when this
// node saw none (it started since): every quote it holds counts.
func (c *Cluster) Vacated(p int) time.Time {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if p < 0 || p >= len(c.others) || c.others[p].IsZero() {
		return time.Time{}
	}
	return c.others[p].Add(-c.cfg.TTL)
}

// Leading reports whether this node holds the leader lease.
func (c *Cluster) Leading() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.leader.rev > 0 && time.Now().Before(c.leader.until)
}

// Status is a node's view for operators.
type Status struct {
	Node    string   `json:"node"`
	Live    []string `json:"live"`
	Owned   int      `json:"owned"`
	Leading bool     `json:"leading"`
}

// Status is this node's view now.
func (c *Cluster) Status() Status {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s := Status{Node: c.cfg.Node, Live: append([]string(nil), c.live...)}
	now := time.Now()
	for _, l := range c.held {
		if c.valid(l, now) {
			s.Owned++
		}
	}
	s.Leading = c.leader.rev > 0 && now.Before(c.leader.until)
	return s
}

// Start announces the node, starts watching the leases and runs the
// membership loop until Close.
func (c *Cluster) Start(ctx context.Context) error {
	w, err := c.leases.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("cluster: watch leases: %w", err)
	}
	loop, stop := context.WithCancel(context.Background())
	c.stop, c.done = stop, make(chan struct{})
	go c.watchAlways(loop, w)
	go c.run(loop)
	return nil
}

// watchAlways keeps a watch of the lease bucket running: a watch that ends,
// or stays silent for a TTL while leases are renewed every quarter of one
// (the servers restarted under it), is replaced by a new one, which starts
// from every lease's current value.
func (c *Cluster) watchAlways(ctx context.Context, w jetstream.KeyWatcher) {
	for ctx.Err() == nil {
		if w != nil {
			c.watch(ctx, w)
			_ = w.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.cfg.TTL / 4):
		}
		var err error
		w, err = c.leases.WatchAll(ctx)
		if err != nil {
			slog.Warn("cluster: watching the leases again", "err", err)
			w = nil
		}
	}
}

// watch keeps the owners table from the lease bucket's updates until the
// watch ends or falls silent for a TTL.
func (c *Cluster) watch(ctx context.Context, w jetstream.KeyWatcher) {
	silent := time.NewTimer(c.cfg.TTL)
	defer silent.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-silent.C:
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			silent.Reset(c.cfg.TTL)
			if e == nil {
				continue // the end of the initial values
			}
			p, ok := partitionKey(e.Key())
			if !ok {
				continue
			}
			o, other := owner{}, true // a hand-over's delete: another node's, or ours released
			if e.Operation() == jetstream.KeyValuePut {
				var v leaseValue
				if json.Unmarshal(e.Value(), &v) == nil {
					o = owner{node: v.Node, expires: e.Created().Add(c.cfg.TTL)}
				}
				other = o.node != c.cfg.Node
			}
			if p < len(c.owners) {
				c.mu.Lock()
				c.owners[p] = o
				if other && e.Created().After(c.others[p]) {
					c.others[p] = e.Created()
				}
				c.mu.Unlock()
			}
		}
	}
}

func partitionKey(k string) (int, bool) {
	if len(k) < 3 || k[:2] != "p." {
		return 0, false
	}
	n, err := strconv.Atoi(k[2:])
	return n, err == nil && n >= 0
}

func key(p int) string { return "p." + strconv.Itoa(p) }

const leaderKey = "leader"

// run is the membership loop: announce, read the live nodes, then take,
// renew or hand over each partition, every TTL/4.
func (c *Cluster) run(ctx context.Context) {
	defer close(c.done)
	every := c.cfg.TTL / 4
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		c.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Cluster) value() []byte {
	b, _ := json.Marshal(leaseValue{Node: c.cfg.Node})
	return b
}

func (c *Cluster) tick(ctx context.Context) {
	tctx, cancel := context.WithTimeout(ctx, c.cfg.TTL/2)
	defer cancel()
	c.mu.Lock()
	// A tick long after the last one (a paused process) proves nothing
	// about the store: no grace until a renewal says so again.
	if time.Since(c.tried) > c.cfg.TTL {
		c.downSince = time.Time{}
	}
	c.tried = time.Now()
	c.mu.Unlock()
	if _, err := c.nodes.Put(tctx, "n."+c.cfg.Node, c.value()); err != nil {
		slog.Warn("cluster: announce", "node", c.cfg.Node, "err", err)
	}
	listed, err := c.liveNodes(tctx)
	c.mu.Lock()
	if err != nil {
		// The store does not answer: keep the last view rather than a
		// cluster of one, which would take every partition.
		slog.Warn("cluster: live nodes", "err", err)
	} else {
		c.live = c.settle(listed, time.Now())
	}
	live := c.live
	c.mu.Unlock()

	// Renew and hand over first, in parallel: a slow round trip must not
	// cost the others their leases.
	var wg sync.WaitGroup
	for p := 0; p < c.cfg.Partitions; p++ {
		want := Rendezvous(p, live)
		c.mu.RLock()
		l := c.held[p]
		o := c.owners[p]
		c.mu.RUnlock()
		switch {
		case l.rev > 0 && want != c.cfg.Node:
			c.release(tctx, p, l) // another live node should own it: hand it over
		case l.rev > 0:
			wg.Add(1)
			go func() { defer wg.Done(); c.renew(tctx, p, l) }()
		case want == c.cfg.Node && (o.node == "" || time.Now().After(o.expires) || o.node == c.cfg.Node):
			wg.Add(1)
			go func() { defer wg.Done(); c.take(tctx, p) }()
		}
	}
	wg.Wait()
	c.tickLeader(tctx)
}

// settle is the live set partitions are spread over: the nodes listed now
// that were listed for a TTL without a break, and this node. A node that is
// missing from a list leaves at once (its partitions move when its leases
// expire); one that appears, or reappears after the store lost its
// announcement, counts only once it stayed, so a flickering view hands
// nothing over. c.mu is held.
func (c *Cluster) settle(listed []string, now time.Time) []string {
	if c.since == nil {
		c.since = map[string]time.Time{}
	}
	next := make(map[string]time.Time, len(listed))
	live := []string{c.cfg.Node}
	for _, n := range listed {
		at, ok := c.since[n]
		if !ok {
			at = now
		}
		next[n] = at
		if n != c.cfg.Node && now.Sub(at) >= c.cfg.TTL {
			live = append(live, n)
		}
	}
	c.since = next
	sort.Strings(live)
	return live
}

func (c *Cluster) liveNodes(ctx context.Context) ([]string, error) {
	keys, err := c.nodes.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if len(k) > 2 && k[:2] == "n." {
			out = append(out, k[2:])
		}
	}
	sort.Strings(out)
	return out, nil
}

// take creates the lease of p where it is vacant (never written, expired or
// handed over).
func (c *Cluster) take(ctx context.Context, p int) {
	sent := time.Now()
	rev, err := c.leases.Create(ctx, key(p), c.value())
	if err != nil {
		return // held by another still, or the bucket is unreachable: next tick
	}
	c.mu.Lock()
	c.held[p] = lease{rev: rev, until: sent.Add(c.cfg.TTL * 3 / 4)}
	c.mu.Unlock()
	c.moved("acquired")
	if c.cfg.Acquired != nil {
		c.cfg.Acquired(p)
	}
}

// renew extends a held lease; a renewal refused (someone else's revision) or
// a lease past its time by this node's clock loses the partition.
func (c *Cluster) renew(ctx context.Context, p int, l lease) {
	sent := time.Now()
	rev, err := c.leases.Update(ctx, key(p), c.value(), l.rev)
	if err == nil {
		c.mu.Lock()
		c.held[p] = lease{rev: rev, until: sent.Add(c.cfg.TTL * 3 / 4)}
		c.downSince = time.Time{}
		c.mu.Unlock()
		return
	}
	var apiErr *jetstream.APIError
	refused := errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == 10164) ||
		errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound)
	if !refused {
		c.mu.Lock()
		if c.downSince.IsZero() {
			c.downSince = sent
		}
		c.mu.Unlock()
	}
	c.mu.RLock()
	ok := c.valid(l, time.Now())
	c.mu.RUnlock()
	if refused || !ok {
		slog.Warn("cluster: lost a partition's lease", "node", c.cfg.Node, "partition", p, "err", err)
		c.drop(p)
	}
}

// drop forgets a lease this node lost and tells the engine.
func (c *Cluster) drop(p int) {
	c.mu.Lock()
	had := c.held[p].rev > 0
	c.held[p] = lease{}
	c.mu.Unlock()
	if had {
		c.moved("lost")
		if c.cfg.Released != nil {
			c.cfg.Released(p)
		}
	}
}

// release hands a partition over: the engine stops acting on it first, then
// the lease is deleted so the next owner need not wait for its expiry.
func (c *Cluster) release(ctx context.Context, p int, l lease) {
	c.mu.Lock()
	c.held[p] = lease{}
	c.mu.Unlock()
	if c.cfg.Released != nil {
		c.cfg.Released(p)
	}
	c.moved("released")
	if err := c.leases.Delete(ctx, key(p), jetstream.LastRevision(l.rev)); err != nil {
		slog.Debug("cluster: hand over", "partition", p, "err", err) // it expires instead
	}
}

// YieldEvery bounds how often a leader that stays unfit hands the leader
// lease over; one found fit since its last hand-over may hand it over at
// once.
const YieldEvery = 30 * time.Second

func (c *Cluster) tickLeader(ctx context.Context) {
	c.mu.RLock()
	l := c.leader
	others := len(c.live) > 1
	yielded := c.yielded
	c.mu.RUnlock()
	sent := time.Now()
	fit := c.cfg.Fit == nil || c.cfg.Fit()
	if fit {
		c.mu.Lock()
		c.vacant = time.Time{}
		// Fit again since its last hand-over: a new spell of unfitness
		// may hand the lease over at once (the bound is for a node that
		// stays unfit, so two such nodes do not pass it back and forth).
		c.yielded = time.Time{}
		c.mu.Unlock()
	}
	if l.rev > 0 && !fit && others && sent.Sub(yielded) >= YieldEvery {
		c.yield(ctx, l)
		return
	}
	if l.rev == 0 && !fit && !c.freeForATTL(ctx, sent) {
		return
	}
	if l.rev > 0 {
		rev, err := c.leases.Update(ctx, leaderKey, c.value(), l.rev)
		if err == nil {
			c.mu.Lock()
			c.leader = lease{rev: rev, until: sent.Add(c.cfg.TTL * 3 / 4)}
			c.mu.Unlock()
			return
		}
		if time.Now().Before(l.until) {
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) {
				return // unreachable for now: keep leading until the lease's time
			}
		}
		slog.Warn("cluster: lost the leader lease", "node", c.cfg.Node, "err", err)
		c.stopLeading()
		return
	}
	rev, err := c.leases.Create(ctx, leaderKey, c.value())
	if err != nil {
		return
	}
	c.mu.Lock()
	c.leader = lease{rev: rev, until: sent.Add(c.cfg.TTL * 3 / 4)}
	lctx, cancel := context.WithCancel(context.Background())
	c.lead = cancel
	c.mu.Unlock()
	c.moved("leader")
	slog.Info("cluster: leading", "node", c.cfg.Node)
	if c.cfg.Lead != nil {
		c.leadWG.Add(1)
		go func() {
			defer c.leadWG.Done()
			c.cfg.Lead(lctx)
		}()
		// The lease's own time bounds the duties too, when renewals stall.
		go func() {
			for {
				select {
				case <-lctx.Done():
					return
				case <-time.After(c.cfg.TTL / 8):
					if !c.Leading() {
						c.stopLeading()
						return
					}
				}
			}
		}()
	}
}

// yield hands the leader lease over: this node cannot do the duties (Fit)
// and another node is live to take it.
func (c *Cluster) yield(ctx context.Context, l lease) {
	slog.Warn("cluster: handing the leader lease over: this node cannot do the leader's duties now", "node", c.cfg.Node)
	c.mu.Lock()
	c.yielded = time.Now()
	c.mu.Unlock()
	c.stopLeading()
	if err := c.leases.Delete(ctx, leaderKey, jetstream.LastRevision(l.rev)); err != nil {
		slog.Debug("cluster: hand the leader lease over", "err", err) // it expires instead
	}
	c.moved("yielded")
}

// freeForATTL reports whether the leader lease has been free for a TTL as
// this unfit node sees it: a fit node, which takes it at once, had its turn.
func (c *Cluster) freeForATTL(ctx context.Context, now time.Time) bool {
	_, err := c.leases.Get(ctx, leaderKey)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
		c.vacant = time.Time{} // held (or the store did not say)
		return false
	}
	if c.vacant.IsZero() {
		c.vacant = now
	}
	return now.Sub(c.vacant) >= c.cfg.TTL
}

func (c *Cluster) stopLeading() {
	c.mu.Lock()
	c.leader = lease{}
	cancel := c.lead
	c.lead = nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (c *Cluster) moved(kind string) {
	if c.cfg.Moved != nil {
		c.cfg.Moved(kind)
	}
}

// Close leaves the cluster: stops the loop, hands every partition and the
// leader lease over, and removes the node's announcement.
func (c *Cluster) Close() {
	if !c.closed.CompareAndSwap(false, true) || c.stop == nil {
		return
	}
	c.stop()
	<-c.done
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.TTL)
	defer cancel()
	for p := range c.held {
		c.mu.RLock()
		l := c.held[p]
		c.mu.RUnlock()
		if l.rev > 0 {
			c.release(ctx, p, l)
		}
	}
	c.mu.RLock()
	l := c.leader
	c.mu.RUnlock()
	c.stopLeading()
	c.leadWG.Wait()
	if l.rev > 0 {
		_ = c.leases.Delete(ctx, leaderKey, jetstream.LastRevision(l.rev))
	}
	_ = c.nodes.Delete(ctx, "n."+c.cfg.Node)
}

// Rendezvous is the live node that should own partition p: the one with the
// highest hash of (node, p). Every node computes the same answer from the
// same live set, and a node's leaving moves only its own partitions.
func Rendezvous(p int, live []string) string {
	best, bestH := "", uint64(0)
	for _, n := range live {
		h := fnv.New64a()
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(p)))
		if v := mix(h.Sum64()); best == "" || v > bestH {
			best, bestH = n, v
		}
	}
	return best
}

// mix spreads FNV's output (splitmix64's finaliser): FNV alone clusters on
// keys that differ in their last bytes.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
