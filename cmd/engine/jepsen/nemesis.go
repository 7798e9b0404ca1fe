package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The fault kinds of the nemesis.
const (
	FaultKillEngine  = "kill-engine"  // SIGKILL an engine, start it again after the fault
	FaultKillNATS    = "kill-nats"    // SIGKILL a nats-server, start it again
	FaultPauseEngine = "pause-engine" // SIGSTOP an engine past its leases (TTL 2 s), SIGCONT
	FaultPauseNATS   = "pause-nats"   // SIGSTOP a nats-server, SIGCONT
	FaultCutEngine   = "cut-engine"   // an engine cut from every nats-server, both ways; clients still reach it
	FaultOneWay      = "oneway-engine"
	FaultSplit       = "split"         // {an engine, a nats-server} | {the rest}: the engine with the NATS minority
	FaultNATSMinor   = "nats-minority" // a nats-server cut from the other two; every engine still reaches it
	FaultLinkDown    = "link-down"     // an engine's link down: nothing reaches it, clients included
	FaultSlow        = "slow"          // a rate-limited (or netem-delayed) link
	FaultLossy       = "lossy"         // 30% of a host's packets dropped each way
	// The read models' PostgreSQL (Options.Postgres).
	FaultPausePG = "pause-pg" // SIGSTOP every process of the server, SIGCONT
	FaultKillPG  = "kill-pg"  // SIGKILL every process of the server, start it again (crash recovery)
	FaultCutPG   = "cut-pg"   // an engine cut from PostgreSQL both ways; it still reaches NATS and its clients
)

// FaultKinds is every kind, in the order a report lists them.
var FaultKinds = []string{FaultKillEngine, FaultKillNATS, FaultPauseEngine, FaultPauseNATS, FaultCutEngine, FaultOneWay,
	FaultSplit, FaultNATSMinor, FaultLinkDown, FaultSlow, FaultLossy, FaultPausePG, FaultKillPG, FaultCutPG}

// pgKinds are the kinds that strike PostgreSQL, drawn only when the cluster runs one.
var pgKinds = []string{FaultPausePG, FaultKillPG, FaultCutPG}

// TargetLeader, as a Fault's Target, strikes the engine that holds the
// cluster's leader lease when the fault strikes (the PostgreSQL projector's
// writer); engine 0 when none says it does.
const TargetLeader = -1

// Fault is one fault: its kind, the process it strikes (an index into the
// engines or the nats-servers, as the kind says), when it starts after the
// nemesis does and how long it lasts.
type Fault struct {
	Kind   string
	Target int
	Host   string `json:",omitempty"` // slow and lossy: the host, when not Target's (pg)
	At     time.Duration
	For    time.Duration
}

func (f Fault) String() string {
	return fmt.Sprintf("%s %s at %v for %v", f.Kind, f.target(), f.At.Round(time.Millisecond), f.For.Round(time.Millisecond))
}

func (f Fault) target() string {
	if f.Host != "" {
		return f.Host
	}
	if f.Target == TargetLeader {
		return "the leader"
	}
	switch f.Kind {
	case FaultPausePG, FaultKillPG:
		return pgHost
	case FaultKillNATS, FaultPauseNATS, FaultNATSMinor:
		return natsName(f.Target)
	case FaultSlow, FaultLossy:
		if f.Target >= 3 {
			return engineName(f.Target - 3)
		}
		return natsName(f.Target)
	}
	return engineName(f.Target)
}

// Window is a fault as it happened: from when it was injected to when it
// was healed (the processes it restarted answering again).
type Window struct {
	Fault Fault
	Start time.Duration // on the history's clock
	End   time.Duration
	Err   string `json:",omitempty"`
}

// Nemesis injects faults into a cluster.
type Nemesis struct {
	C   *Cluster
	H   *History
	Log func(format string, args ...any)

	mu      sync.Mutex
	windows []Window
}

// RandomSchedule is n faults of kinds drawn with rng (seeded by the caller,
// who prints the seed) over the engines and servers (and PostgreSQL, with
// pg), each for 4 to 12 s, with 3 to 8 s of quiet between them, starting
// after lead.
func RandomSchedule(rng *rand.Rand, engines int, pg bool, n int, lead time.Duration) []Fault {
	kinds := FaultKinds
	if !pg {
		kinds = slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return slices.Contains(pgKinds, k) })
	}
	hosts := 3 + engines // slow and lossy: servers, engines and pg
	if pg {
		hosts++
	}
	var out []Fault
	at := lead
	for range n {
		k := kinds[rng.IntN(len(kinds))]
		f := Fault{Kind: k, At: at, For: time.Duration(4000+rng.IntN(8000)) * time.Millisecond}
		switch k {
		case FaultKillNATS, FaultPauseNATS, FaultNATSMinor:
			f.Target = rng.IntN(3)
		case FaultSlow, FaultLossy:
			if f.Target = rng.IntN(hosts); f.Target == 3+engines {
				f.Target, f.Host = 0, pgHost
			}
		case FaultPausePG, FaultKillPG:
			f.Target = 0
		default:
			f.Target = rng.IntN(engines)
		}
		if k == FaultPauseEngine {
			f.For = max(f.For, 5*time.Second) // past the lease
		}
		out = append(out, f)
		at += f.For + time.Duration(3000+rng.IntN(5000))*time.Millisecond
	}
	return out
}

// Run injects each fault at its time, heals it after its duration, and
// returns when the last is healed or ctx ends (healing what is injected).
func (n *Nemesis) Run(ctx context.Context, faults []Fault) {
	began := time.Now()
	for _, f := range faults {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(began.Add(f.At))):
		}
		if f.Target == TargetLeader {
			f.Target = n.C.Leader()
		}
		w := Window{Fault: f, Start: n.H.Now()}
		err := n.inject(f)
		if err == nil {
			n.Log("nemesis: %s", f)
			select {
			case <-ctx.Done():
			case <-time.After(f.For):
			}
		}
		err = errors.Join(err, n.heal(f))
		w.End = n.H.Now()
		if err != nil {
			w.Err = err.Error()
			n.Log("nemesis: %s: %v", f, err)
		} else {
			n.Log("nemesis: %s healed after %v", f.Kind, (w.End - w.Start).Round(time.Millisecond))
		}
		n.mu.Lock()
		n.windows = append(n.windows, w)
		n.mu.Unlock()
	}
}

// Windows are the faults injected so far.
func (n *Nemesis) Windows() []Window {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Window(nil), n.windows...)
}

func (n *Nemesis) natsHosts(except int) []string {
	var out []string
	for i := range 3 {
		if i != except {
			out = append(out, natsName(i))
		}
	}
	return out
}

func (n *Nemesis) inject(f Fault) error {
	c := n.C
	switch f.Kind {
	case FaultKillEngine:
		c.Engines[f.Target].Kill()
	case FaultKillNATS:
		c.NATS[f.Target].Kill()
	case FaultPauseEngine:
		return c.Engines[f.Target].Signal(syscall.SIGSTOP)
	case FaultPauseNATS:
		return c.NATS[f.Target].Signal(syscall.SIGSTOP)
	case FaultCutEngine:
		return c.Net.Partition([]string{engineName(f.Target)}, n.natsHosts(-1))
	case FaultOneWay:
		for _, s := range n.natsHosts(-1) {
			if err := c.Net.Cut(engineName(f.Target), s); err != nil {
				return err
			}
		}
	case FaultSplit: // PostgreSQL, when there is one, with the majority
		minority := []string{engineName(f.Target), natsName(f.Target % 3)}
		var majority []string
		for i := range c.Engines {
			if i != f.Target {
				majority = append(majority, engineName(i))
			}
		}
		majority = append(majority, n.natsHosts(f.Target%3)...)
		if c.PG != nil {
			majority = append(majority, pgHost)
		}
		return c.Net.Partition(minority, majority)
	case FaultNATSMinor:
		return c.Net.Partition([]string{natsName(f.Target)}, n.natsHosts(f.Target))
	case FaultLinkDown:
		return c.Net.Down(engineName(f.Target))
	case FaultSlow:
		return c.Net.Slow(f.target())
	case FaultLossy:
		return c.Net.Lossy(f.target(), 30)
	case FaultPausePG:
		return c.PG.Signal(syscall.SIGSTOP)
	case FaultKillPG:
		c.PG.Kill()
	case FaultCutPG:
		return c.Net.Partition([]string{engineName(f.Target)}, []string{pgHost})
	default:
		return fmt.Errorf("jepsen: no fault %q", f.Kind)
	}
	return nil
}

// heal ends the fault and waits until what it struck answers again.
func (n *Nemesis) heal(f Fault) error {
	c := n.C
	switch f.Kind {
	case FaultKillEngine:
		if err := c.Engines[f.Target].Start(); err != nil {
			return err
		}
		return c.WaitEngine(f.Target, 90*time.Second)
	case FaultKillNATS:
		if err := c.NATS[f.Target].Start(); err != nil {
			return err
		}
		return c.WaitNATS(f.Target, 60*time.Second)
	case FaultPauseEngine:
		return c.Engines[f.Target].Signal(syscall.SIGCONT)
	case FaultPauseNATS:
		return c.NATS[f.Target].Signal(syscall.SIGCONT)
	case FaultPausePG:
		return c.PG.Signal(syscall.SIGCONT)
	case FaultKillPG:
		if err := c.PG.Start(); err != nil {
			return err
		}
		return c.WaitPG(60 * time.Second)
	}
	return c.Net.HealAll()
}

// FaultSummary is, per fault kind, how many times it struck, how long it
// lasted in all, the attempts invoked while it held with their outcomes,
// the histories porcupine checked that one of those attempts belongs to
// (an order's clientOrderId, an account's balance), the anomalies found
// on an account and key an attempt invoked from the fault until 5 s after
// its heal touched, and the longest time without an acknowledged write
// from its start to 5 s after it was healed (the deployment's outage,
// whichever account).
func FaultSummary(windows []Window, ops []Op, anomalies []Anomaly) string {
	type stat struct {
		n         int
		held      time.Duration
		outcomes  map[string]int
		attempts  int
		gap       time.Duration
		histories map[string]bool
		anomalies map[int]bool
	}
	// The history an attempt belongs to: an order's by its clientOrderId
	// (a cancel's, through the place that answered its brokerOrderId), a
	// balance operation's by its account.
	coid := map[string]string{}
	for _, op := range ops {
		if op.Kind == KindPlace && op.OrderID != "" {
			coid[op.Account+"/"+op.OrderID] = op.Key
		}
	}
	history := func(op Op) string {
		switch op.Kind {
		case KindPlace:
			return "order " + op.Account + "/" + op.Key
		case KindCancel:
			if k, ok := coid[op.Account+"/"+op.Key]; ok {
				return "order " + op.Account + "/" + k
			}
		case KindBalance:
			return "balance " + op.Account
		}
		return ""
	}
	touches := func(op Op, a Anomaly) bool {
		return op.Account == a.Account && (op.Key == a.Key || op.Kind == KindRead && strconv.FormatUint(op.Revision, 10) == a.Key)
	}
	acks := ackTimes(ops)
	stats := map[string]*stat{}
	for _, w := range windows {
		s := stats[w.Fault.Kind]
		if s == nil {
			s = &stat{outcomes: map[string]int{}, histories: map[string]bool{}, anomalies: map[int]bool{}}
			stats[w.Fault.Kind] = s
		}
		s.n++
		s.held += w.End - w.Start
		for _, op := range ops {
			if op.Call >= w.Start && op.Call <= w.End {
				s.attempts++
				s.outcomes[op.Outcome]++
				if h := history(op); h != "" {
					s.histories[h] = true
				}
			}
			if op.Call >= w.Start && op.Call <= w.End+5*time.Second {
				for i, a := range anomalies {
					if touches(op, a) {
						s.anomalies[i] = true
					}
				}
			}
		}
		s.gap = max(s.gap, longestWithoutAck(w, acks))
	}
	var b strings.Builder
	for _, k := range FaultKinds {
		s := stats[k]
		if s == nil {
			continue
		}
		fmt.Fprintf(&b, "%s: %d times, %v in all; %d attempts invoked meanwhile (ok %d, dup %d, refused %d, fail %d, unknown %d) in %d checked histories; %d anomalies; longest time without an acknowledged write %v\n",
			k, s.n, s.held.Round(time.Millisecond), s.attempts, s.outcomes[OK], s.outcomes[Dup], s.outcomes[Refused], s.outcomes[Fail], s.outcomes[Unknown],
			len(s.histories), len(s.anomalies), s.gap.Round(time.Millisecond))
	}
	return strings.TrimRight(b.String(), "\n")
}

// ackTimes are the times writes were acknowledged (ok or dup), in order.
func ackTimes(ops []Op) []time.Duration {
	var acks []time.Duration
	for _, op := range ops {
		if (op.Kind == KindPlace || op.Kind == KindCancel || op.Kind == KindBalance) && (op.Outcome == OK || op.Outcome == Dup) {
			acks = append(acks, op.Return)
		}
	}
	slices.Sort(acks)
	return acks
}

// longestWithoutAck is the longest time without an acknowledged write from
// the fault's start until 5 s after its heal.
func longestWithoutAck(w Window, acks []time.Duration) time.Duration {
	var gap time.Duration
	last, until := w.Start, w.End+5*time.Second
	for _, at := range acks {
		if at <= w.Start || at > until {
			continue
		}
		gap = max(gap, at-last)
		last = at
	}
	return max(gap, until-last)
}

// AcksAfter is, per window, how many writes were acknowledged from grace
// after the fault's start until its heal.
func AcksAfter(windows []Window, ops []Op, grace time.Duration) []int {
	acks := ackTimes(ops)
	out := make([]int, len(windows))
	for i, w := range windows {
		for _, at := range acks {
			if at > w.Start+grace && at <= w.End {
				out[i]++
			}
		}
	}
	return out
}
