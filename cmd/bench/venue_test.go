package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/venue"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// Issue 16: the venue checks add at most 10% to the order path's CPU per
// order. The benchmarks below place the same market orders (BTC-PERP,
// quantity 1, buy and sell alternating, one quote) on a plain account and on
// an account issued into group g1 of venueConfig, in the same run:
//
//	go test ./cmd/bench -run '^$' -bench 'MarketOrder' -benchmem -count 5 -benchtime 2s

// The account package's test helpers, as the benchmarks need them.
var (
	t0  = time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)
	dec = events.MustDecimal
)

// mkt quotes BTC-PERP at bid/ask and permits it (multiplier 1, at most 100).
func mkt(bid, ask string) trading.Market {
	return trading.Market{
		Quotes: map[string]trading.Quote{"BTC-PERP": {Instrument: "BTC-PERP", Bid: dec(bid), Ask: dec(ask), At: t0}},
		Specs:  map[string]trading.Spec{"BTC-PERP": {Symbol: "BTC-PERP", Multiplier: dec("1"), MaxQuantity: dec("100")}},
	}
}

// order is a day market order of qty on BTC-PERP.
func order(id, side, qty string, m trading.Market) *trading.PlaceOrder {
	return &trading.PlaceOrder{ClientOrderID: id, Instrument: "BTC-PERP", Side: side, OrderType: "market", Quantity: dec(qty), TimeInForce: "day", Market: m}
}

// venueOwner creates the bench venue.
var venueOwner = venuecmd.Owner{UserID: "usr_bench", Verified: true, Owner: true}

// venueConfig is group g1 of venue v1: BTC-PERP permitted (instrument limit
// 50), a rule lowering the group's limit to 20, the paper route, a stage at
// version 1 and a condition with two commissions (0.35 per unit on each side,
// opening and closing; 1.25 per order on opening fills).
func venueConfig() []commands.Command {
	set := func(kind, id, body string) commands.Command {
		return &venuecmd.SetConfig{Kind: kind, ID: id, Body: []byte(body)}
	}
	return []commands.Command{
		&venuecmd.CreateVenue{OrgID: "org_bench", Name: "Bench", FirmTenantID: "t", By: venueOwner},
		set(venuecmd.KindInstruments, "BTC-PERP", `{"active":true,"maxQuantity":"50"}`),
		set(venuecmd.KindConditions, "std", `{"name":"std","commissions":[`+
			`{"name":"exchange","basis":"per_unit","amount":"0.35","timing":"per_side","direction":"both","unit":"quantity"},`+
			`{"name":"ticket","basis":"per_order","amount":"1.25","timing":"per_side","direction":"open"}]}`),
		set(venuecmd.KindRoutes, "paper", `{"target":"paper"}`),
		set(venuecmd.KindStages, "eval", `{"name":"eval","version":"1"}`),
		set(venuecmd.KindGroups, "g1", `{"name":"G1","instruments":["BTC-PERP"],"conditionId":"std","routeId":"paper","stageId":"eval"}`),
		set(venuecmd.KindRules, "cap", `{"groupId":"g1","maxQuantity":"20"}`),
	}
}

// compiledTerms runs venueConfig through the venue aggregate and compiles its
// terms as the engine does after each venue commit.
func compiledTerms(tb testing.TB) map[string]*trading.Terms {
	s := venue.New("v1")
	for i, c := range venueConfig() {
		if err := c.Validate(); err != nil {
			tb.Fatalf("%T: %v", c, err)
		}
		env := commands.Envelope{ID: ulid.Make(), At: t0, Key: "k" + strconv.Itoa(i), Digest: "d" + strconv.Itoa(i), Cmd: c}
		evs, err := venue.Decide(s, env)
		if err != nil {
			tb.Fatalf("%T: %v", c, err)
		}
		for _, e := range evs {
			s = venue.Apply(s, e)
		}
	}
	ts := venue.Terms(s, uint64(len(venueConfig())))
	if t := ts["v1/g1"]; t == nil || t.Route != "paper" || t.StageVersion != "1" || len(t.Commissions) != 2 || t.Permitted["BTC-PERP"].String() != "20" {
		tb.Fatalf("terms %+v", t)
	}
	return ts
}

// openAccount opens a USD account with a large balance; issued accounts carry
// the venue, group and stage version as the venue door's IssueAccount sets them.
func openAccount(issued bool) *tenantcmd.OpenAccount {
	c := &tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "PA1", Currency: "USD", StartingBalance: dec("10000000")}
	if issued {
		c.VenueID, c.GroupID, c.StageVersion = "v1", "g1", "1"
	}
	return c
}

// benchEnv is an envelope whose id counts n, so derived fill ids differ.
func benchEnv(n uint64, c commands.Command) commands.Envelope {
	var id ulid.ULID
	id[0] = 1
	binary.BigEndian.PutUint64(id[8:], n)
	return commands.Envelope{ID: id, At: t0, Cmd: c}
}

// ordersPerAccount is how many orders one account takes before the loop
// opens a fresh one, so its clientOrderId index stays the size of a busy
// day's and does not grow with b.N (the reopening, one Decide in a thousand
// orders, is timed with them).
const ordersPerAccount = 1000

// orderLoop places market orders on one account through Decide + Apply,
// buy and sell alternating, every order under one market.
type orderLoop struct {
	b    *testing.B
	open *tenantcmd.OpenAccount
	envs []commands.Envelope
	s    *account.State
	k    int
}

func newOrderLoop(b *testing.B, open *tenantcmd.OpenAccount, m trading.Market) *orderLoop {
	l := &orderLoop{b: b, open: open, envs: make([]commands.Envelope, ordersPerAccount), k: ordersPerAccount}
	for i := range l.envs {
		c := order("o"+strconv.Itoa(i), []string{"buy", "sell"}[i%2], "1", m)
		l.envs[i] = benchEnv(uint64(i+1), c)
	}
	return l
}

// run places n orders.
func (l *orderLoop) run(n int) {
	for ; n > 0; n-- {
		if l.k == len(l.envs) {
			l.s, l.k = account.New("a1"), 0
			l.apply(benchEnv(0, l.open), 1)
		}
		l.apply(l.envs[l.k], 2)
		l.k++
	}
}

func (l *orderLoop) apply(env commands.Envelope, want int) {
	evs, err := account.Decide(l.s, env)
	if err != nil || len(evs) != want {
		l.b.Fatalf("%T: %v %v", env.Cmd, evs, err)
	}
	for _, e := range evs {
		l.s = account.Apply(l.s, e)
	}
}

// paired runs chunks of n orders on two accounts in turn (which goes first
// alternating), one op being one order on each, and reports each one's wall
// and CPU time per order and the second's over the first's: both share every
// swing in the machine's speed, which on a shared VM is wider than 10%.
func paired(b *testing.B, n int, names [2]string, run [2]func(n int)) {
	var wall, cpu [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i += n {
		for r := range 2 {
			j := (r + i/n) % 2
			w, c := time.Now(), cpuTime()
			run[j](min(n, b.N-i))
			wall[j] += time.Since(w)
			cpu[j] += cpuTime() - c
		}
	}
	b.StopTimer()
	for j, name := range names {
		b.ReportMetric(float64(wall[j].Nanoseconds())/float64(b.N), name+"-ns/order")
		b.ReportMetric(float64(cpu[j].Nanoseconds())/float64(b.N), name+"-cpu-ns/order")
	}
	b.ReportMetric(float64(wall[1])/float64(wall[0]), "ratio-wall")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "ratio-cpu")
}

// BenchmarkMarketOrder is Decide + Apply of a market order on a plain account
// and on an issued one (every venue check passes, both commissions post),
// each on its own and then paired. Both run under the same market, compiled
// terms attached as the engine attaches them to every order.
func BenchmarkMarketOrder(b *testing.B) {
	m := mkt("64999.5", "65000.5")
	m.Terms = compiledTerms(b)
	for _, issued := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "issued"}[issued], func(b *testing.B) {
			l := newOrderLoop(b, openAccount(issued), m)
			b.ReportAllocs()
			b.ResetTimer()
			l.run(b.N)
		})
	}
	b.Run("paired", func(b *testing.B) {
		plain, issued := newOrderLoop(b, openAccount(false), m), newOrderLoop(b, openAccount(true), m)
		paired(b, ordersPerAccount, [2]string{"plain", "issued"}, [2]func(int){plain.run, issued.run})
	})
}

// TestIssuedBenchOrdersPayCommissions checks what BenchmarkMarketOrder
// measures: the issued account's buy pays both commissions, its sell the
// per-unit one.
func TestIssuedBenchOrdersPayCommissions(t *testing.T) {
	m := mkt("64999.5", "65000.5")
	m.Terms = compiledTerms(t)
	s := account.New("a1")
	var fees []string
	for i, c := range []commands.Command{openAccount(true), order("o1", "buy", "1", m), order("o2", "sell", "1", m)} {
		evs, err := account.Decide(s, benchEnv(uint64(i), c))
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		for _, e := range evs {
			if f, ok := e.(evacct.OrderFilled); ok && f.Commission != nil {
				fees = append(fees, f.Commission.String())
			}
			s = account.Apply(s, e)
		}
	}
	if fmt.Sprint(fees) != "[1.6 0.35]" {
		t.Fatalf("commissions %v", fees)
	}
}

// BenchmarkEngineMarketOrder is the whole command path as cmd/bench drives
// it (engine.Engine.Account: prepare, Decide, commit with fsync, ack) on an
// embedded JetStream, for a plain and an issued account of one engine;
// cpu-us/order is the process's CPU (the embedded server's included).
func BenchmarkEngineMarketOrder(b *testing.B) {
	ctx := context.Background()
	log, err := eventlog.Open(ctx, eventlog.Config{DataDir: b.TempDir(), Sync: "always", Replicas: 1, Stream: "EVT"})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	now := func() time.Time { return t0 }
	e, err := engine.New(engine.Config{Log: log, Feed: market.NewSim(market.DefaultCrypto(), 1, now),
		Catalog: market.NewCatalog(market.DefaultCrypto()), Now: now})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.Start(ctx, nil); err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	sys := events.Principal{System: "bench"}
	for i, c := range venueConfig() {
		env := e.Envelope(sys, "k"+strconv.Itoa(i), c)
		env.Digest = env.Key
		if _, err := e.Venue(ctx, "v1", env); err != nil {
			b.Fatalf("%T: %v", c, err)
		}
	}
	for _, id := range []string{"plain", "issued"} {
		if _, err := e.Account(ctx, id, e.Envelope(sys, "", openAccount(id == "issued"))); err != nil {
			b.Fatal(err)
		}
	}
	placed := map[string]int{} // orders per account, across the runs of b.N
	place := func(b *testing.B, id string, n int) {
		for ; n > 0; n-- {
			k := placed[id]
			placed[id]++
			c := &trading.PlaceOrder{ClientOrderID: "o" + strconv.Itoa(k), Instrument: "BTC-PERP",
				Side: []string{"buy", "sell"}[k%2], OrderType: "market", Quantity: dec("1"), TimeInForce: "day"}
			res, err := e.Account(ctx, id, e.Envelope(sys, c.ClientOrderID, c))
			if err != nil || len(res.Events) != 2 {
				b.Fatalf("order %d: %v %v", k, res.Events, err)
			}
		}
	}
	for _, id := range []string{"plain", "issued"} {
		b.Run(id, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			b.ResetTimer()
			place(b, id, b.N)
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/1e3/float64(b.N), "cpu-us/order")
		})
	}
	b.Run("paired", func(b *testing.B) {
		paired(b, 100, [2]string{"plain", "issued"}, [2]func(int){
			func(n int) { place(b, "plain", n) }, func(n int) { place(b, "issued", n) }})
	})
}
