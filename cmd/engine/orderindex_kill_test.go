package main_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Repeat a history with -args -orderindex.seed=N (the test logs its seed);
// run a longer one with -args -orderindex.long=5m.
var (
	orderIndexSeed = flag.Uint64("orderindex.seed", 0, "seed of TestOrderIndexSurvivesKillsAndSnapshots (0: from the clock)")
	orderIndexLong = flag.Duration("orderindex.long", 0, "wall time of TestOrderIndexSurvivesKillsAndSnapshots's history (0: 30 s)")
)

// TestOrderIndexSurvivesKillsAndSnapshots is issue 46's property, through
// the binary: over a random history of orders, repeats and cancels on a few
// accounts, with snapshot rounds every second, clean stops (which snapshot
// every account) and kill -9 at random points with requests in flight,
// every repeat of an acknowledged clientOrderId answers 409
// idempotency_conflict naming the earlier brokerOrderId, every fresh
// clientOrderId (near misses of used ones included: one byte changed,
// another case, a suffix, one used on another account) is accepted, and
// an attempt cut by a kill settles, when repeated after the restart, on
// one order: never two orders under one clientOrderId.
func TestOrderIndexSurvivesKillsAndSnapshots(t *testing.T) {
	seed := *orderIndexSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	wall := 30 * time.Second
	if *orderIndexLong > 0 {
		wall = *orderIndexLong
	}
	t.Logf("seed %d: repeat with go test ./cmd/engine -run 'TestOrderIndexSurvivesKillsAndSnapshots$' -args -orderindex.seed=%d", seed, seed)

	bin := build(t)
	dir, addr := t.TempDir(), freePort(t)
	env := []string{"ENGINE_SNAPSHOTS=on", "ENGINE_SNAPSHOT_EVERY=1s", "ENGINE_DEMO_ACCOUNTS=3", "ENGINE_LOG_LEVEL=info"}
	h := &oiHistory{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 46)), placed: map[oiKey]string{}, epochOf: map[oiKey]int{},
		unknown: map[oiKey]bool{}, working: map[string][]string{}, ids: map[string]oiKey{}}
	h.p = start(t, bin, dir, addr, env...)
	c := readCreds(t, dir)
	h.key = c.TradingKey
	for _, a := range c.Accounts {
		h.accts = append(h.accts, a.AccountNumber)
	}

	began := time.Now()
	for time.Since(began) < wall || h.epoch < 3 {
		h.steps(40 + h.rng.IntN(120))
		if h.rng.IntN(3) == 0 {
			// Let a snapshot round (every second) take what this epoch placed.
			time.Sleep(time.Duration(1100+h.rng.IntN(900)) * time.Millisecond)
			h.steps(h.rng.IntN(30))
		}
		switch {
		case h.epoch%4 == 3 || h.rng.IntN(5) == 0:
			// A clean stop snapshots every account.
			if err := h.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			_, _ = h.p.cmd.Process.Wait()
			h.terms++
		default:
			h.killInFlight()
		}
		h.p = start(t, bin, dir, addr, env...)
		h.restarts(h.p.out.String())
		h.epoch++
		h.settle()
		h.repeatOld()
		h.checkListed()
	}
	// Every clientOrderId the history placed, repeated once more.
	for _, k := range h.keys {
		h.repeat(k)
	}
	h.checkListed()
	if h.seeded == 0 {
		t.Errorf("seed %d: no restart was seeded from snapshots (%d restarts): the snapshot path went untested", seed, h.epoch)
	}
	t.Logf("seed %d: %d epochs (%d kill -9 with %d requests in flight, %d clean stops, %d restarts seeded from snapshots), "+
		"%d clientOrderIds placed, %d fresh accepted (%d near misses), %d repeats answered 409 (%d from an earlier epoch), "+
		"%d cut by a kill and settled after it (%d had been placed), %d cancels, in %v",
		seed, h.epoch, h.kills, h.inFlight, h.terms, h.seeded, len(h.keys), h.fresh, h.near, h.repeats, h.oldRepeats,
		h.cut, h.cutPlaced, h.cancels, time.Since(began).Round(time.Millisecond))
}

type oiKey struct{ acct, coid string }

func (k oiKey) String() string { return k.acct + "/" + k.coid }

// oiHistory is the test's model of what the engine acknowledged.
type oiHistory struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	p    *proc
	key  string

	accts   []string
	placed  map[oiKey]string    // acknowledged clientOrderId: its brokerOrderId
	ids     map[string]oiKey    // brokerOrderId: its clientOrderId
	epochOf map[oiKey]int       // the epoch (restarts before) that placed it
	keys    []oiKey             // placed, oldest first
	unknown map[oiKey]bool      // sent when a kill came; not answered
	working map[string][]string // account: its resting orders (wmu: the in-flight clients add to it)
	wmu     sync.Mutex
	epoch   int
	n       int

	kills, terms, seeded, inFlight                            int
	fresh, near, repeats, oldRepeats, cut, cutPlaced, cancels int
}

// oiAnswer is one POST /api/trading/order's answer.
type oiAnswer struct {
	status int
	code   string
	id     string // the order's brokerOrderId (200) or the one a 409 names
	coid   string // the clientOrderId the answer names
	body   string
	err    error
}

func (a oiAnswer) String() string {
	if a.err != nil {
		return "no answer: " + a.err.Error()
	}
	return fmt.Sprintf("%d %s", a.status, a.body)
}

// place sends an order under k with a random body: a market order, or a
// limit order far from the market that rests.
func (h *oiHistory) place(rng *rand.Rand, k oiKey) oiAnswer {
	body := map[string]any{"clientOrderId": k.coid, "instrument": "BTC-PERP", "side": []string{"buy", "sell"}[rng.IntN(2)],
		"orderType": "market", "quantity": "0.00" + strconv.Itoa(1+rng.IntN(5))}
	if rng.IntN(3) == 0 {
		body["orderType"] = "limit"
		body["limitPrice"] = map[any]string{"buy": "1000", "sell": "1000000"}[body["side"]]
	}
	st, b, err := call(h.p.base, h.key, "POST", "/api/trading/order?account="+k.acct, body)
	a := oiAnswer{status: st, body: string(b), err: err}
	if err != nil {
		return a
	}
	var m struct {
		Code   string `json:"code"`
		Params struct {
			BrokerOrderID string `json:"brokerOrderId"`
			ClientOrderID string `json:"clientOrderId"`
		} `json:"params"`
		Order struct {
			BrokerOrderID string `json:"brokerOrderId"`
			ClientOrderID string `json:"clientOrderId"`
			State         string `json:"state"`
		} `json:"order"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		a.err = fmt.Errorf("%w: %s", err, b)
		return a
	}
	a.code = m.Code
	switch st {
	case 200:
		a.id, a.coid = m.Order.BrokerOrderID, m.Order.ClientOrderID
		if m.Order.State == "working" {
			h.rest(k.acct, a.id)
		}
	case 409:
		a.id, a.coid = m.Params.BrokerOrderID, m.Params.ClientOrderID
	}
	return a
}

// rest notes a working order, for cancels.
func (h *oiHistory) rest(acct, id string) {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	h.working[acct] = append(h.working[acct], id)
}

// fail stops the test naming the seed.
func (h *oiHistory) fail(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("seed %d, epoch %d: %s", h.seed, h.epoch, fmt.Sprintf(format, args...))
}

// record notes that k was acknowledged as id.
func (h *oiHistory) record(k oiKey, id string) {
	h.t.Helper()
	if id == "" {
		h.fail("%s acknowledged without a brokerOrderId", k)
	}
	if other, ok := h.ids[id]; ok && other != k {
		h.fail("%s acknowledged as %s, the order of %s", k, id, other)
	}
	h.placed[k], h.ids[id], h.epochOf[k] = id, k, h.epoch
	h.keys = append(h.keys, k)
	delete(h.unknown, k)
}

// expectRepeat checks the answer to a repeat of k: 409 idempotency_conflict
// naming k and its earlier order.
func (h *oiHistory) expectRepeat(k oiKey, a oiAnswer) {
	h.t.Helper()
	want := h.placed[k]
	if a.err != nil || a.status != 409 || a.code != "idempotency_conflict" || a.id != want || a.coid != k.coid {
		h.fail("repeat of %s (placed as %s in epoch %d): want 409 idempotency_conflict naming it, got %s", k, want, h.epochOf[k], a)
	}
	h.repeats++
	if h.epochOf[k] < h.epoch {
		h.oldRepeats++
	}
}

// expectFresh checks the answer to a clientOrderId never used on its
// account: accepted, as a new order.
func (h *oiHistory) expectFresh(k oiKey, a oiAnswer) {
	h.t.Helper()
	if a.err != nil || a.status != 200 || a.coid != k.coid {
		h.fail("fresh clientOrderId %s: want 200 with a new order, got %s", k, a)
	}
	h.record(k, a.id)
	h.fresh++
}

// repeat sends k again and checks the answer.
func (h *oiHistory) repeat(k oiKey) {
	h.t.Helper()
	h.expectRepeat(k, h.place(h.rng, k))
}

// newKey draws a clientOrderId for acct: mostly new ones; some near misses
// of one already used (another byte, another case, a suffix, one used on
// another account). It says whether acct used it before.
func (h *oiHistory) newKey(acct string) (k oiKey, near bool) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-"
	k.acct = acct
	switch r := h.rng.IntN(10); {
	case r < 2 && len(h.keys) > 0:
		old := h.keys[h.rng.IntN(len(h.keys))].coid
		b := []byte(old)
		switch h.rng.IntN(3) {
		case 0:
			i := h.rng.IntN(len(b))
			b[i] = alphabet[(strings.IndexByte(alphabet, b[i])+1+h.rng.IntN(len(alphabet)-1))%len(alphabet)]
		case 1:
			if s := strings.ToUpper(old); s != old {
				b = []byte(s)
			} else {
				b = []byte(strings.ToLower(old))
			}
		default:
			if len(b) < 64 {
				b = append(b, alphabet[h.rng.IntN(len(alphabet))])
			} else {
				b = b[:63]
			}
		}
		k.coid, near = string(b), true
	case r < 3 && len(h.keys) > 0:
		k.coid, near = h.keys[h.rng.IntN(len(h.keys))].coid, true // perhaps another account's
	case r < 5:
		b := make([]byte, 1+h.rng.IntN(64))
		for i := range b {
			b[i] = alphabet[h.rng.IntN(len(alphabet))]
		}
		k.coid = string(b)
	default:
		h.n++
		k.coid = fmt.Sprintf("oi-%d-%d", h.epoch, h.n)
	}
	return k, near
}

// pick draws a placed clientOrderId: a recent one or any, as old as the
// first epoch.
func (h *oiHistory) pick() oiKey {
	if h.rng.IntN(2) == 0 {
		return h.keys[max(0, len(h.keys)-1-h.rng.IntN(8))]
	}
	return h.keys[h.rng.IntN(len(h.keys))]
}

// steps runs n sequential operations on a live engine.
func (h *oiHistory) steps(n int) {
	h.t.Helper()
	for range n {
		acct := h.accts[h.rng.IntN(len(h.accts))]
		switch r := h.rng.IntN(20); {
		case r < 6 && len(h.keys) > 0:
			h.repeat(h.pick())
		case r < 8 && len(h.working[acct]) > 0:
			ws := h.working[acct]
			i := h.rng.IntN(len(ws))
			id := ws[i]
			h.working[acct] = append(ws[:i:i], ws[i+1:]...)
			st, b, err := call(h.p.base, h.key, "POST", "/api/trading/cancel?account="+acct, map[string]any{"brokerOrderId": id})
			if err != nil || st != 200 {
				h.fail("cancel %s on %s: %d %s %v", id, acct, st, b, err)
			}
			h.cancels++
		case r < 9:
			// The same fresh clientOrderId twice at once: one order, the
			// other answer names it.
			k, _ := h.newKey(acct)
			if _, used := h.placed[k]; used || h.unknown[k] {
				h.repeat(k)
				continue
			}
			var as [2]oiAnswer
			var wg sync.WaitGroup
			for i := range as {
				rng := rand.New(rand.NewPCG(h.rng.Uint64(), 0))
				wg.Go(func() { as[i] = h.place(rng, k) })
			}
			wg.Wait()
			if as[0].status == 409 {
				as[0], as[1] = as[1], as[0]
			}
			h.expectFresh(k, as[0])
			h.expectRepeat(k, as[1])
		default:
			k, near := h.newKey(acct)
			if _, used := h.placed[k]; used {
				h.repeat(k)
				continue
			}
			if h.unknown[k] {
				continue // settled after the next restart
			}
			h.expectFresh(k, h.place(h.rng, k))
			if near {
				h.near++
			}
		}
	}
}

// killInFlight sends orders from several clients at once (fresh, repeats
// and a fresh clientOrderId twice) and kills the engine with SIGKILL among
// them. An answered attempt is checked as usual; one cut is settled after
// the restart.
func (h *oiHistory) killInFlight() {
	h.t.Helper()
	type sentOne struct {
		k      oiKey
		repeat bool
		a      oiAnswer
	}
	var (
		mu   sync.Mutex
		sent []sentOne
		wg   sync.WaitGroup
		gone = make(chan struct{})
	)
	for w := range 6 {
		// Each client's keys are drawn here: the model's rng is not shared.
		var plan []sentOne
		for range 200 {
			acct := h.accts[h.rng.IntN(len(h.accts))]
			if h.rng.IntN(3) == 0 && len(h.keys) > 0 {
				plan = append(plan, sentOne{k: h.pick(), repeat: true})
				continue
			}
			h.n++
			k := oiKey{acct, fmt.Sprintf("oi-%d-k%d-%d", h.epoch, w, h.n)}
			plan = append(plan, sentOne{k: k})
			if h.rng.IntN(4) == 0 {
				plan = append(plan, sentOne{k: k}) // the same again, perhaps cut between the two
			}
		}
		rng := rand.New(rand.NewPCG(h.rng.Uint64(), uint64(w)))
		wg.Go(func() {
			for _, s := range plan {
				select {
				case <-gone:
					return
				default:
				}
				s.a = h.place(rng, s.k)
				mu.Lock()
				sent = append(sent, s)
				mu.Unlock()
				if s.a.err != nil {
					return
				}
			}
		})
	}
	time.Sleep(time.Duration(5+h.rng.IntN(150)) * time.Millisecond)
	if err := h.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		h.t.Fatal(err)
	}
	_, _ = h.p.cmd.Process.Wait()
	close(gone)
	wg.Wait()
	h.kills++
	h.inFlight += len(sent)

	// Fresh keys: at most one 200, and every 409 names it.
	byKey := map[oiKey][]oiAnswer{}
	var order []oiKey
	for _, s := range sent {
		if s.repeat {
			if s.a.err == nil {
				h.expectRepeat(s.k, s.a)
			}
			continue
		}
		if _, ok := byKey[s.k]; !ok {
			order = append(order, s.k)
		}
		byKey[s.k] = append(byKey[s.k], s.a)
	}
	for _, k := range order {
		var id string
		for _, a := range byKey[k] {
			switch {
			case a.err != nil:
			case a.status == 200 && id == "":
				h.expectFresh(k, a)
				id = a.id
			case a.status == 409 && a.code == "idempotency_conflict" && a.coid == k.coid && id != "" && a.id == id:
				// Named the order its twin, sent before it by the same client, placed.
				h.repeats++
			default:
				h.fail("fresh %s sent while the engine was killed answered %s (other answers %v)", k, a, byKey[k])
			}
		}
		if id == "" {
			h.unknown[k] = true
		}
	}
}

// settle repeats every attempt the last kill cut: it places the order once
// now or answers 409 naming the order placed before the kill.
func (h *oiHistory) settle() {
	h.t.Helper()
	var cut []oiKey
	for k := range h.unknown {
		cut = append(cut, k)
	}
	slices.SortFunc(cut, func(a, b oiKey) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range cut {
		a := h.place(h.rng, k)
		switch {
		case a.err == nil && a.status == 200 && a.coid == k.coid:
			h.record(k, a.id)
		case a.err == nil && a.status == 409 && a.code == "idempotency_conflict" && a.coid == k.coid:
			h.record(k, a.id)
			h.cutPlaced++
		default:
			h.fail("%s cut by the kill, repeated after the restart: want 200 or 409 naming its order, got %s", k, a)
		}
		h.cut++
		h.repeat(k) // and from now on 409
	}
}

// repeatOld repeats, after a restart, clientOrderIds of every earlier epoch.
func (h *oiHistory) repeatOld() {
	h.t.Helper()
	first := map[int]int{}
	for i, k := range h.keys {
		if _, ok := first[h.epochOf[k]]; !ok {
			first[h.epochOf[k]] = i
		}
	}
	for e := 0; e < h.epoch; e++ {
		i, ok := first[e]
		if !ok {
			continue
		}
		h.repeat(h.keys[i]) // the first of its epoch
		end := len(h.keys)
		if j, ok := first[e+1]; ok {
			end = j
		}
		for range 3 {
			h.repeat(h.keys[i+h.rng.IntN(end-i)])
		}
	}
}

// checkListed reads every account's orders: never two orders under one
// clientOrderId, no order no answer acknowledged, and every acknowledged
// one there under its id (the read model may lag its commits a moment:
// what is missing is read again for up to 5 s).
func (h *oiHistory) checkListed() {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, acct := range h.accts {
		for {
			missing := h.listed(acct)
			if missing == "" {
				break
			}
			if time.Now().After(deadline) {
				h.fail("%s", missing)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// listed checks one account's orders; it fails at once on two orders under
// one clientOrderId or one the history does not know, and says what
// acknowledged order is not listed.
func (h *oiHistory) listed(acct string) (missing string) {
	h.t.Helper()
	seen := map[string]string{}
	cursor := ""
	for {
		path := "/api/account/orders?limit=500&account=" + acct
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		st, b, err := call(h.p.base, h.key, "GET", path, nil)
		if err != nil || st != 200 {
			h.fail("orders of %s: %d %s %v", acct, st, b, err)
		}
		var page struct {
			NextCursor *string `json:"nextCursor"`
			Orders     []struct {
				BrokerOrderID string `json:"brokerOrderId"`
				ClientOrderID string `json:"clientOrderId"`
			} `json:"orders"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			h.fail("orders of %s: %v", acct, err)
		}
		for _, o := range page.Orders {
			if other, ok := seen[o.ClientOrderID]; ok && other != o.BrokerOrderID {
				h.fail("two orders under clientOrderId %s on %s: %s and %s", o.ClientOrderID, acct, other, o.BrokerOrderID)
			}
			seen[o.ClientOrderID] = o.BrokerOrderID
			k := oiKey{acct, o.ClientOrderID}
			if want, ok := h.placed[k]; !ok {
				h.fail("order %s under %s that no answer acknowledged", o.BrokerOrderID, k)
			} else if want != o.BrokerOrderID {
				h.fail("%s lists order %s, acknowledged as %s", k, o.BrokerOrderID, want)
			}
		}
		if page.NextCursor == nil || *page.NextCursor == "" {
			break
		}
		cursor = *page.NextCursor
	}
	for k, id := range h.placed {
		if k.acct == acct && seen[k.coid] != id {
			return fmt.Sprintf("acknowledged %s (%s) is not among the account's orders", k, id)
		}
	}
	return ""
}

var oiSeeded = regexp.MustCompile(`"msg":"aggregates seeded from snapshots","snapshots":(\d+)`)

// restarts counts a start that seeded its accounts from snapshots.
func (h *oiHistory) restarts(log string) {
	if m := oiSeeded.FindStringSubmatch(log); m != nil && m[1] != "0" {
		h.seeded++
	}
}
