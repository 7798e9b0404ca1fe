package copier_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	copiercmd "github.com/svc/engine/commands/copier"
	"github.com/svc/engine/engine/copier"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evcopier "github.com/svc/engine/events/copier"
)

func dec(s string) events.Decimal { return events.MustDecimal(s) }

func decp(s string) *events.Decimal { d := dec(s); return &d }

func TestSize(t *testing.T) {
	mult := func(v string) evcopier.Sizing { return evcopier.Sizing{Mode: evcopier.SizeMultiplier, Value: dec(v)} }
	for _, tc := range []struct {
		name string
		in   copier.SizeInput
		want string
	}{
		{"a multiplier of one copies the quantity", copier.SizeInput{Sizing: mult("1"), Leader: dec("3")}, "3"},
		{"a multiplier scales it", copier.SizeInput{Sizing: mult("0.5"), Leader: dec("3")}, "1.5"},
		{"rounded down to the lot step", copier.SizeInput{Sizing: mult("0.5"), Leader: dec("3"), LotStep: dec("1")}, "1"},
		{"rounded down to a fractional lot step", copier.SizeInput{Sizing: mult("0.3"), Leader: dec("1"), LotStep: dec("0.25")}, "0.25"},
		{"below one lot is nothing", copier.SizeInput{Sizing: mult("0.1"), Leader: dec("3"), LotStep: dec("1")}, "0"},
		{"below the minimum is nothing", copier.SizeInput{Sizing: mult("1"), Leader: dec("0.002"), LotStep: dec("0.001"), MinQuantity: dec("0.01")}, "0"},
		{"at the minimum is kept", copier.SizeInput{Sizing: mult("1"), Leader: dec("0.01"), LotStep: dec("0.001"), MinQuantity: dec("0.01")}, "0.01"},
		{"a fixed size ignores the leader's", copier.SizeInput{Sizing: evcopier.Sizing{Mode: evcopier.SizeFixed, Value: dec("2")}, Leader: dec("7")}, "2"},
		{"a max caps it", copier.SizeInput{Sizing: evcopier.Sizing{Mode: evcopier.SizeMultiplier, Value: dec("10"), Max: decp("4")}, Leader: dec("1")}, "4"},
		{"a max off the lot step rounds down", copier.SizeInput{Sizing: evcopier.Sizing{Mode: evcopier.SizeMultiplier, Value: dec("10"), Max: decp("4.5")}, Leader: dec("1"), LotStep: dec("1")}, "4"},
		{"equity: in proportion of the follower's to the leader's", copier.SizeInput{Sizing: evcopier.Sizing{Mode: evcopier.SizeEquity, Value: dec("1")},
			Leader: dec("4"), LeaderEquity: decp("100000"), FollowerEquity: decp("25000")}, "1"},
		{"equity: times the value", copier.SizeInput{Sizing: evcopier.Sizing{Mode: evcopier.SizeEquity, Value: dec("2")},
			Leader: dec("4"), LeaderEquity: decp("100000"), FollowerEquity: decp("25000")}, "2"},
		{"equity: rounded down to the lot step", copier.SizeInput{Sizing: evcopier.Sizing{Mode: evcopier.SizeEquity, Value: dec("1")},
			Leader: dec("1"), LeaderEquity: decp("30000"), FollowerEquity: decp("10000"), LotStep: dec("0.01")}, "0.33"},
		{"equity: an unknown equity sizes nothing", copier.SizeInput{Sizing: evcopier.Sizing{Mode: evcopier.SizeEquity, Value: dec("1")},
			Leader: dec("4"), LeaderEquity: decp("100000")}, "0"},
		{"equity: a leader without equity sizes nothing", copier.SizeInput{Sizing: evcopier.Sizing{Mode: evcopier.SizeEquity, Value: dec("1")},
			Leader: dec("4"), LeaderEquity: decp("-5"), FollowerEquity: decp("100")}, "0"},
		{"an unknown mode sizes nothing", copier.SizeInput{Sizing: evcopier.Sizing{Mode: "double", Value: dec("1")}, Leader: dec("4")}, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := copier.Size(tc.in); got.Cmp(dec(tc.want)) != 0 {
				t.Fatalf("Size = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestReduceSize(t *testing.T) {
	for _, tc := range []struct {
		name            string
		sized, position string
		closeAll        bool
		want            string
	}{
		{"the sized part of the position", "1", "3", false, "1"},
		{"never more than the position", "5", "3", false, "3"},
		{"a short position counts by its size", "2", "-3", false, "2"},
		{"the leader closing all closes all of the follower's", "1", "3", true, "3"},
		{"nothing open, nothing closed", "1", "0", true, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := copier.ReduceSize(dec(tc.sized), dec(tc.position), tc.closeAll); got.Cmp(dec(tc.want)) != 0 {
				t.Fatalf("ReduceSize = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestMappingAndDirection(t *testing.T) {
	f := evcopier.Follower{AccountID: "f", InstrumentMap: map[string]string{"ES": "MES"}, Direction: evcopier.DirectionInverse}
	for _, tc := range []struct {
		name               string
		f                  evcopier.Follower
		inst, side         string
		wantInst, wantSide string
	}{
		{"a mapped instrument, inverse: the micro, the other way", f, "ES", "buy", "MES", "sell"},
		{"an unmapped instrument as it is", f, "BTC-PERP", "sell", "BTC-PERP", "buy"},
		{"same direction keeps the side", evcopier.Follower{Direction: evcopier.DirectionSame}, "ETH-PERP", "sell", "ETH-PERP", "sell"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := copier.Instrument(tc.f, tc.inst); got != tc.wantInst {
				t.Fatalf("instrument %s, want %s", got, tc.wantInst)
			}
			if got := copier.Side(tc.f, tc.side); got != tc.wantSide {
				t.Fatalf("side %s, want %s", got, tc.wantSide)
			}
		})
	}
}

func TestClientOrderIDIsDerivedOncePerLeaderOrderAndFollower(t *testing.T) {
	a := copier.ClientOrderID("L", "o1", "F1")
	if a != copier.ClientOrderID("L", "o1", "F1") {
		t.Fatal("not stable")
	}
	for _, other := range []string{copier.ClientOrderID("L", "o2", "F1"), copier.ClientOrderID("L", "o1", "F2"), copier.ClientOrderID("M", "o1", "F1")} {
		if other == a {
			t.Fatal("two mirrors share an id")
		}
	}
	if err := commands.ClientOrderID("clientOrderId", a); err != nil || !strings.HasPrefix(a, "cp-") {
		t.Fatalf("%q: %v", a, err)
	}
	// The id never changes between versions: a mirror placed before an
	// upgrade is found by it after. Long ids hash the same way.
	long := strings.Repeat("x", 300)
	for _, in := range [][3]string{{"L", "o1", "F1"}, {long, "o1", "F1"}} {
		h := sha256.Sum256([]byte(in[0] + "\x00" + in[1] + "\x00" + in[2]))
		if got, want := copier.ClientOrderID(in[0], in[1], in[2]), "cp-"+hex.EncodeToString(h[:16]); got != want {
			t.Fatalf("ClientOrderID = %s, want %s", got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		_ = copier.ClientOrderID("01JD7Z0000LEADER", "01JD7Z0000ORDER0000000000", "01JD7Z0000FOLLOWER")
	}); n > 1 {
		t.Fatalf("%v allocations an id, want the string's only", n)
	}
}

func TestActions(t *testing.T) {
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	o := func(id, inst, side, qty string, reduce bool) evacct.Order {
		return evacct.Order{BrokerOrderID: id, ClientOrderID: "c-" + id, Instrument: inst, Side: side, OrderType: "market",
			Quantity: dec(qty), TimeInForce: "gtc", ReduceOnly: reduce, CreatedAt: at}
	}
	fill := func(id, qty, after string) evacct.OrderFilled {
		return evacct.OrderFilled{BrokerOrderID: id, Quantity: dec(qty), Position: evacct.Position{Quantity: dec(after)}, Done: true}
	}
	mirrored := o("m", "BTC-PERP", "buy", "1", false)
	mirrored.LeaderOrderID = "elsewhere"
	open := func(m map[string]string) func(string) events.Decimal {
		return func(inst string) events.Decimal {
			if v, ok := m[inst]; ok {
				return dec(v)
			}
			return events.Int(0)
		}
	}
	for _, tc := range []struct {
		name string
		evs  []events.Event
		open map[string]string
		want []string // op:order[:closeAll]
	}{
		{"an accepted order is placed", []events.Event{evacct.OrderPlaced{Order: o("a", "BTC-PERP", "buy", "1", false)}, fill("a", "1", "1")}, nil,
			[]string{"place:a"}},
		{"an ioc's own cancel is not mirrored", []events.Event{evacct.OrderPlaced{Order: o("a", "BTC-PERP", "buy", "1", false)},
			evacct.OrderCanceled{BrokerOrderID: "a", Reason: "ioc"}}, nil, []string{"place:a"}},
		{"a requested cancel is", []events.Event{evacct.OrderCanceled{BrokerOrderID: "a", Reason: "requested"}}, nil, []string{"cancel:a"}},
		{"a flatten's cancels and its close of the whole position", []events.Event{evacct.OrderCanceled{BrokerOrderID: "w", Reason: "flatten"},
			evacct.OrderPlaced{Order: o("c", "BTC-PERP", "sell", "2", true)}, fill("c", "2", "0")}, map[string]string{}, []string{"cancel:w", "place:c:all"}},
		{"a partial close is sized", []events.Event{evacct.OrderPlaced{Order: o("c", "BTC-PERP", "sell", "1", true)}, fill("c", "1", "2")},
			map[string]string{"BTC-PERP": "2"}, []string{"place:c"}},
		{"a resting reduce-only order for the whole position closes all", []events.Event{evacct.OrderPlaced{Order: o("t", "BTC-PERP", "sell", "3", true)}},
			map[string]string{"BTC-PERP": "3"}, []string{"place:t:all"}},
		{"a change is mirrored", []events.Event{evacct.OrderReplaced{BrokerOrderID: "a", Quantity: dec("2")}}, nil, []string{"replace:a"}},
		{"a risk cancel is the follower's own to decide", []events.Event{evacct.OrderCanceled{BrokerOrderID: "a", Reason: "risk"}}, nil, nil},
		{"a mirror is never mirrored again", []events.Event{evacct.OrderPlaced{Order: mirrored}}, nil, nil},
		{"fills and balances are not actions", []events.Event{fill("a", "1", "1"), evacct.BalanceChanged{}}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range copier.Actions(tc.evs, open(tc.open), nil) {
				s := a.Op + ":" + a.OrderID
				if a.CloseAll {
					s += ":all"
				}
				got = append(got, s)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("actions %v, want %v", got, tc.want)
			}
		})
	}
}

var at0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func env(cmd commands.Command, key string) commands.Envelope {
	return commands.Envelope{ID: ulid.Make(), At: at0, Key: key, Digest: "d-" + key, Principal: events.Principal{TenantID: "t1"}, Cmd: cmd}
}

func follower(id string) copiercmd.FollowerSpec {
	s := copiercmd.FollowerSpec{AccountID: id}
	if err := s.Validate(""); err != nil {
		panic(err)
	}
	return s
}

func fold(s *copier.State, evs ...events.Event) *copier.State {
	for _, e := range evs {
		s = copier.Apply(s, e)
	}
	return s
}

func TestDecide(t *testing.T) {
	created := []events.Event{
		evcopier.GroupCreated{GroupID: "g", Leader: "L", Owner: "t1", LeaderRev: 10, At: at0},
		evcopier.FollowerSet{Follower: follower("F1").Follower(), LeaderRev: 10, At: at0},
	}
	off := follower("F1")
	no := false
	off.Enabled = &no
	for _, tc := range []struct {
		name     string
		given    []events.Event
		when     commands.Envelope
		wantCode commands.Code
		want     []string // event types
		check    func(t *testing.T, s *copier.State)
	}{
		{name: "a group is made with its followers", when: env(&copiercmd.CreateGroup{Leader: "L", Followers: []copiercmd.FollowerSpec{follower("F1"), follower("F2")}, LeaderRev: 7}, "k1"),
			want: []string{"copier.group_created.v1", "copier.follower_set.v1", "copier.follower_set.v1", "idempotency.key_used.v1"},
			check: func(t *testing.T, s *copier.State) {
				if s.Leader != "L" || len(s.Followers) != 2 || s.Followers["F2"].Added != 7 || s.Owner != "t1" {
					t.Fatalf("%+v", s)
				}
			}},
		{name: "a group made again with another key is refused", given: created,
			when: env(&copiercmd.CreateGroup{Leader: "L"}, "k2"), wantCode: commands.CodeIdempotencyConflict},
		{name: "a follower is added at the leader's revision", given: created, when: env(&copiercmd.SetFollower{Spec: follower("F2"), LeaderRev: 12}, "k3"),
			want: []string{"copier.follower_set.v1", "idempotency.key_used.v1"},
			check: func(t *testing.T, s *copier.State) {
				if f := s.Followers["F2"]; f.Added != 12 || f.EnabledAt(12) || !f.EnabledAt(13) {
					t.Fatalf("%+v", f)
				}
			}},
		{name: "switching a follower off takes effect after the leader's revision", given: created,
			when: env(&copiercmd.SetFollower{Spec: off, LeaderRev: 20}, "k4"), want: []string{"copier.follower_set.v1", "idempotency.key_used.v1"},
			check: func(t *testing.T, s *copier.State) {
				if f := s.Followers["F1"]; f.Enabled || !f.EnabledAt(15) || !f.EnabledAt(20) || f.EnabledAt(21) || f.EnabledAt(10) {
					t.Fatalf("%+v", f)
				}
			}},
		{name: "setting a follower as it is records only the key", given: created, when: env(&copiercmd.SetFollower{Spec: follower("F1"), LeaderRev: 20}, "k5"),
			want: []string{"idempotency.key_used.v1"}},
		{name: "the leader cannot follow", given: created, when: env(&copiercmd.SetFollower{Spec: follower("L")}, "k6"), wantCode: commands.CodeInvalidRequest},
		{name: "no group, no follower", when: env(&copiercmd.SetFollower{Spec: follower("F1")}, "k7"), wantCode: commands.CodeNotFound},
		{name: "a follower is removed", given: created, when: env(&copiercmd.RemoveFollower{AccountID: "F1", LeaderRev: 30}, "k8"),
			want: []string{"copier.follower_removed.v1", "idempotency.key_used.v1"},
			check: func(t *testing.T, s *copier.State) {
				if len(s.Followers) != 0 {
					t.Fatalf("%+v", s.Followers)
				}
			}},
		{name: "removing an account that does not follow is not found", given: created, when: env(&copiercmd.RemoveFollower{AccountID: "F9"}, "k9"), wantCode: commands.CodeNotFound},
		{name: "outcomes are recorded and advance the group", given: created,
			when: env(&copiercmd.RecordMirrors{LeaderSeq: 11, Actions: []evcopier.Action{{Op: "place", LeaderOrderID: "o", Mirrors: []evcopier.Mirror{{Follower: "F1", Status: "mirrored"}}}}}, ""),
			want: []string{"copier.mirrors_recorded.v1"},
			check: func(t *testing.T, s *copier.State) {
				if s.Through != 11 || len(s.Recent) != 1 {
					t.Fatalf("through %d, %d recent", s.Through, len(s.Recent))
				}
			}},
		{name: "outcomes recorded already record nothing", given: append(created, evcopier.MirrorsRecorded{LeaderSeq: 11}),
			when: env(&copiercmd.RecordMirrors{LeaderSeq: 11}, ""), want: nil},
		{name: "a partial record does not advance the group", given: created,
			when: env(&copiercmd.RecordMirrors{LeaderSeq: 11, Partial: true}, ""), want: []string{"copier.mirrors_recorded.v1"},
			check: func(t *testing.T, s *copier.State) {
				if s.Through != 0 {
					t.Fatalf("through %d", s.Through)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fold(copier.New("g"), tc.given...)
			evs, err := copier.Decide(s, tc.when)
			if tc.wantCode != "" {
				var ref *commands.Refusal
				if !errors.As(err, &ref) || ref.Code != tc.wantCode || len(evs) != 0 {
					t.Fatalf("got %v %v, want %s", evs, err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, e := range evs {
				types = append(types, e.Type())
			}
			if !reflect.DeepEqual(types, tc.want) {
				t.Fatalf("events %v, want %v", types, tc.want)
			}
			s = fold(s, evs...)
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

// A repeat of a write's Idempotency-Key with the same request answers the
// first answer and records nothing.
func TestAKeyRepeatedReplaysTheAnswer(t *testing.T) {
	e1 := env(&copiercmd.CreateGroup{Leader: "L", Followers: []copiercmd.FollowerSpec{follower("F1")}}, "k")
	evs, err := copier.Decide(copier.New("g"), e1)
	if err != nil {
		t.Fatal(err)
	}
	s := fold(copier.New("g"), evs...)
	_, err = copier.Decide(s, e1)
	var rp *commands.Replay
	if !errors.As(err, &rp) || rp.Status != 201 || !strings.Contains(string(rp.Body), `"leaderAccountId":"L"`) {
		t.Fatalf("%v", err)
	}
}

func TestParticipants(t *testing.T) {
	s := fold(copier.New("g"),
		evcopier.GroupCreated{GroupID: "g", Leader: "L", LeaderRev: 5},
		evcopier.FollowerSet{Follower: follower("A").Follower(), LeaderRev: 5},
		evcopier.FollowerSet{Follower: follower("B").Follower(), LeaderRev: 9},
	)
	names := func(seq uint64) (out []string) {
		for _, f := range copier.Participants(s, seq) {
			out = append(out, f.AccountID)
		}
		return out
	}
	if got := names(5); got != nil {
		t.Fatalf("at its own revision: %v", got)
	}
	if got := names(7); !reflect.DeepEqual(got, []string{"A"}) {
		t.Fatalf("before B joined: %v", got)
	}
	if got := names(10); !reflect.DeepEqual(got, []string{"A", "B"}) {
		t.Fatalf("after: %v", got)
	}
}

// Every copier event type has a case in Apply: a replay rebuilds the live state.
func TestEveryEventHasAnApplyCase(t *testing.T) {
	src, err := os.ReadFile("copier.go")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "copier.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sw, ok := n.(*ast.TypeSwitchStmt); ok {
			for _, c := range sw.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					if sel, ok := e.(*ast.SelectorExpr); ok {
						cases[sel.Sel.Name] = true
					}
				}
			}
		}
		return true
	})
	for name, fac := range evcopier.Registry() {
		ev, err := fac.Decode([]byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if typ := reflect.TypeOf(ev).Name(); !cases[typ] {
			t.Errorf("%s (%s) has no case in Apply", typ, name)
		}
	}
}
