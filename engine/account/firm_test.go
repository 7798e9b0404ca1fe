package account_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	riskcmd "github.com/svc/engine/commands/risk"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evidem "github.com/svc/engine/events/idem"
)

func credit(ref, amount string) *firmcmd.BalanceOp {
	return &firmcmd.BalanceOp{ReferenceID: ref, AccountNumber: "EV1", Op: "credit", Amount: dec(amount), Env: "sandbox"}
}

func debit(ref, amount string) *firmcmd.BalanceOp {
	return &firmcmd.BalanceOp{ReferenceID: ref, AccountNumber: "EV1", Op: "debit", Amount: dec(amount), Env: "sandbox"}
}

// runFirm opens an evaluation account in currency with 1000, applies given,
// then validates and decides when.
func runFirm(t *testing.T, currency string, given []commands.Command, when commands.Command) (*account.State, []events.Event, error) {
	t.Helper()
	s := account.New("a1")
	open := &tenantcmd.OpenAccount{TenantID: "firm", Broker: "paper", AccountNumber: "EV1", Currency: currency, StartingBalance: dec("1000"), Kind: "evaluation"}
	for i, c := range append([]commands.Command{open}, given...) {
		evs, err := account.Decide(s, env(i, c))
		if err != nil {
			t.Fatalf("given %d (%T): %v", i, c, err)
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
	}
	if err := when.Validate(); err != nil {
		return s, nil, err
	}
	evs, err := account.Decide(s, env(99, when))
	return s, evs, err
}

func TestFirmRefusals(t *testing.T) {
	m := mkt("100", "101")
	withMarks := func(c *firmcmd.BalanceOp, marks map[string]events.Decimal) *firmcmd.BalanceOp {
		c.Marks = marks
		return c
	}
	cases := []struct {
		name       string
		currency   string
		given      []commands.Command
		when       commands.Command
		wantStatus int
		wantCode   string
		wantParams string
	}{
		{name: "same reference, other body", given: []commands.Command{credit("r1", "10")}, when: credit("r1", "11"), wantStatus: 409, wantCode: "idempotency_conflict"},
		{name: "more decimals than USD posts", when: credit("r1", "1.001"), wantStatus: 400, wantCode: "amount_precision_exceeded", wantParams: "map[currency:USD decimals:2]"},
		{name: "more decimals than USDC posts on an issued account", currency: "USDC", when: credit("r1", "1.0000001"), wantStatus: 400, wantCode: "amount_precision_exceeded", wantParams: "map[currency:USDC decimals:6]"},
		{name: "a currency not issued", when: &firmcmd.BalanceOp{ReferenceID: "r1", AccountNumber: "EV1", Op: "credit", Amount: dec("1"), Currency: "EUR", Env: "sandbox"}, wantStatus: 400, wantCode: "currency_not_issuable", wantParams: "map[currency:EUR environment:sandbox]"},
		{name: "USDC outside the sandbox", when: &firmcmd.BalanceOp{ReferenceID: "r1", AccountNumber: "EV1", Op: "credit", Amount: dec("1"), Currency: "USDC", Env: "production"}, wantStatus: 400, wantCode: "currency_not_issuable", wantParams: "map[currency:USDC environment:production]"},
		{name: "a debit beyond the balance", when: debit("r1", "1000.01"), wantStatus: 409, wantCode: "balance_refused", wantParams: "map[reason:insufficient_funds]"},
		{name: "a negative adjustment beyond the balance", when: &firmcmd.BalanceOp{ReferenceID: "r1", AccountNumber: "EV1", Op: "adjustment", Amount: dec("-1001"), Env: "sandbox"}, wantStatus: 409, wantCode: "balance_refused", wantParams: "map[reason:insufficient_funds]"},
		{name: "a debit while halted", given: []commands.Command{&firmcmd.HaltAccount{}}, when: debit("r1", "1"), wantStatus: 409, wantCode: "balance_refused", wantParams: "map[reason:permission_denied]"},
		{name: "a debit with a position that cannot be valued", given: []commands.Command{buy("c1", "1", m)}, when: debit("r1", "1"), wantStatus: 409, wantCode: "balance_refused", wantParams: "map[reason:invalid_request]"},
		{name: "a debit of the unrealized loss's share", given: []commands.Command{buy("c1", "1", m)}, when: withMarks(debit("r1", "990"), map[string]events.Decimal{"BTC-PERP": dec("90")}), wantStatus: 409, wantCode: "balance_refused", wantParams: "map[reason:insufficient_funds]"},
		{name: "a credit while held for reconciliation", given: []commands.Command{&firmcmd.HoldForReconciliation{}}, when: credit("r1", "1"), wantStatus: 423, wantCode: "reconciliation_hold"},
		{name: "a reset while held for reconciliation", given: []commands.Command{&firmcmd.HoldForReconciliation{}}, when: &firmcmd.ResetAccount{}, wantStatus: 423, wantCode: "reconciliation_hold"},
		{name: "a halt over an evaluation breach", given: []commands.Command{&riskcmd.BreachEvaluation{}}, when: &firmcmd.HaltAccount{}, wantStatus: 409, wantCode: "lock_not_owned"},
		{name: "a zero credit", when: credit("r1", "0"), wantStatus: 400, wantCode: "invalid_request"},
		{name: "a reference too long", when: credit(string(make([]byte, 129)), "1"), wantStatus: 400, wantCode: "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cur := c.currency
			if cur == "" {
				cur = "USD"
			}
			_, evs, err := runFirm(t, cur, c.given, c.when)
			var ref *commands.Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("want refusal %s, got %v (events %v)", c.wantCode, err, evs)
			}
			if commands.StatusOf(ref.Code, ref.Malformed) != c.wantStatus || string(ref.Code) != c.wantCode || (c.wantParams != "" && fmt.Sprint(ref.Params) != c.wantParams) || len(evs) != 0 {
				t.Fatalf("got %d %s %v, want %d %s %s", commands.StatusOf(ref.Code, ref.Malformed), ref.Code, ref.Params, c.wantStatus, c.wantCode, c.wantParams)
			}
		})
	}
}

func TestFirmTransitions(t *testing.T) {
	m := mkt("100", "101")
	t.Run("a credit records the ledger entry with the balance after", func(t *testing.T) {
		_, evs, err := runFirm(t, "USD", nil, credit("r1", "10.50"))
		if err != nil || len(evs) != 1 {
			t.Fatalf("%v %v", evs, err)
		}
		bc := evs[0].(evacct.BalanceChanged)
		if bc.ReferenceID != "r1" || bc.Op != "credit" || bc.Balance.String() != "1010.5" || bc.Digest == "" {
			t.Fatalf("%+v", bc)
		}
	})
	t.Run("the same reference and body changes nothing", func(t *testing.T) {
		_, evs, err := runFirm(t, "USD", []commands.Command{credit("r1", "10")}, credit("r1", "10.00"))
		if err != nil || len(evs) != 0 {
			t.Fatalf("%v %v", evs, err)
		}
	})
	t.Run("a debit of free collateral with a winning position", func(t *testing.T) {
		_, evs, err := runFirm(t, "USD", []commands.Command{buy("c1", "1", m)},
			&firmcmd.BalanceOp{ReferenceID: "r1", AccountNumber: "EV1", Op: "debit", Amount: dec("1000"), Env: "sandbox", Marks: map[string]events.Decimal{"BTC-PERP": dec("200")}})
		if err != nil || evs[0].(evacct.BalanceChanged).Balance.String() != "0" {
			t.Fatalf("%v %v", evs, err)
		}
	})
	t.Run("halt, halt again, resume, resume again", func(t *testing.T) {
		s, evs, _ := runFirm(t, "USD", []commands.Command{&firmcmd.HaltAccount{}}, &firmcmd.HaltAccount{})
		if len(evs) != 0 || !s.FirmHalted() || fmt.Sprint(account.Holds(s, t0)) != "[firm_halt]" {
			t.Fatalf("halted twice: %v %v", evs, account.Holds(s, t0))
		}
		s, evs, _ = runFirm(t, "USD", []commands.Command{&firmcmd.HaltAccount{}, &firmcmd.ResumeAccount{}}, &firmcmd.ResumeAccount{})
		if len(evs) != 0 || s.FirmHalted() || len(account.Holds(s, t0)) != 0 {
			t.Fatalf("resumed twice: %v", evs)
		}
	})
	t.Run("a halt refuses additions and keeps positions", func(t *testing.T) {
		s, _, err := runFirm(t, "USD", []commands.Command{buy("c1", "1", m), &firmcmd.HaltAccount{}}, buy("c2", "1", m))
		var ref *commands.Refusal
		if !errors.As(err, &ref) || ref.Code != "risk_locked" || len(s.Positions) != 1 {
			t.Fatalf("%v %v", err, s.Positions)
		}
	})
	t.Run("a reconciliation hold names its hold", func(t *testing.T) {
		s, evs, _ := runFirm(t, "USD", []commands.Command{&firmcmd.HoldForReconciliation{}}, &firmcmd.HoldForReconciliation{})
		if len(evs) != 0 || fmt.Sprint(account.Holds(s, t0)) != "[reconciliation_hold]" {
			t.Fatalf("%v %v", evs, account.Holds(s, t0))
		}
	})
	t.Run("a reset is ledger-first and returns the starting state", func(t *testing.T) {
		given := []commands.Command{credit("r1", "5"), buy("c1", "1", m), limit("c2", "buy", "1", "50", m)}
		s, evs, err := runFirm(t, "USD", given, &firmcmd.ResetAccount{ReferenceID: "reset-1"})
		if err != nil || len(evs) != 3 {
			t.Fatalf("%v %v", evs, err)
		}
		bc, ok := evs[0].(evacct.BalanceChanged)
		if !ok || bc.Op != "reset" || bc.Balance.String() != "1000" || bc.Amount.String() != "-5" {
			t.Fatalf("first event %#v", evs[0])
		}
		if _, ok := evs[1].(evacct.OrderCanceled); !ok {
			t.Fatalf("second event %#v", evs[1])
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
		if len(s.Positions) != 0 || len(s.Working) != 0 || s.Balance.String() != "1000" || !s.Realized.IsZero() {
			t.Fatalf("after reset %+v", s)
		}
		_, again, err := runFirm(t, "USD", append(given, &firmcmd.ResetAccount{ReferenceID: "reset-1"}), &firmcmd.ResetAccount{ReferenceID: "reset-1"})
		if err != nil || len(again) != 0 {
			t.Fatalf("reset repeated: %v %v", again, err)
		}
	})
	t.Run("replay rebuilds the back-office state", func(t *testing.T) {
		given := []commands.Command{credit("r1", "5"), &firmcmd.HaltAccount{}, &firmcmd.HoldForReconciliation{}, &firmcmd.ReleaseReconciliation{}}
		s, _, _ := runFirm(t, "USD", given, &firmcmd.ResumeAccount{})
		r := account.New("a1")
		for i, c := range append([]commands.Command{&tenantcmd.OpenAccount{TenantID: "firm", Broker: "paper", AccountNumber: "EV1", Currency: "USD", StartingBalance: dec("1000"), Kind: "evaluation"}}, given...) {
			evs, _ := account.Decide(r, env(i, c))
			for _, e := range evs {
				r = account.Apply(r, e)
			}
		}
		if !reflect.DeepEqual(s.Firm, r.Firm) || !reflect.DeepEqual(s.References, r.References) {
			t.Fatalf("replayed %+v, live %+v", r.Firm, s.Firm)
		}
	})
}

// The halt and resume through the venue door carry an Idempotency-Key and
// the request's digest: the key is recorded with the answer in the commit,
// a repeat answers it again, another request under it is 409. The partner
// route's (no digest) records no key.
func TestKeyedHaltAndResume(t *testing.T) {
	keyed := func(n int, key, digest string, cmd commands.Command) commands.Envelope {
		e := env(n, cmd)
		e.Key, e.Digest = key, digest
		return e
	}
	halt, resume := &firmcmd.HaltAccount{}, &firmcmd.ResumeAccount{}
	cases := []struct {
		name      string
		given     []commands.Envelope
		when      commands.Envelope
		wantTypes string // the recorded event types
		wantBody  string // of the KeyUsed, or of the replay
		wantCode  string
	}{
		{name: "a keyed halt records the halt and the key", when: keyed(9, "k1", "d1", halt),
			wantTypes: "[account.firm_halted.v1 idempotency.key_used.v1]", wantBody: `{"accountNumber":"EV1","halted":true}`},
		{name: "a keyed halt of a halted account records the key only", given: []commands.Envelope{env(1, halt)}, when: keyed(9, "k1", "d1", halt),
			wantTypes: "[idempotency.key_used.v1]", wantBody: `{"accountNumber":"EV1","halted":true}`},
		{name: "a keyed resume answers halted false", given: []commands.Envelope{env(1, halt)}, when: keyed(9, "k1", "d1", resume),
			wantTypes: "[account.firm_resumed.v1 idempotency.key_used.v1]", wantBody: `{"accountNumber":"EV1","halted":false}`},
		{name: "the same key and request answer the first answer", given: []commands.Envelope{keyed(1, "k1", "d1", halt), env(2, resume)},
			when: keyed(9, "k1", "d1", halt), wantBody: `{"accountNumber":"EV1","halted":true}`},
		{name: "the same key with another request is a conflict", given: []commands.Envelope{keyed(1, "k1", "d1", halt)},
			when: keyed(9, "k1", "d2", resume), wantCode: "idempotency_conflict"},
		{name: "a refused keyed halt records nothing", given: []commands.Envelope{env(1, &riskcmd.BreachEvaluation{})},
			when: keyed(9, "k1", "d1", halt), wantCode: "lock_not_owned"},
		{name: "the partner route's halt records no key", when: keyed(9, "k1", "", halt), wantTypes: "[account.firm_halted.v1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := account.New("a1")
			open := env(0, &tenantcmd.OpenAccount{TenantID: "firm", Broker: "paper", AccountNumber: "EV1", Currency: "USD", StartingBalance: dec("1000"), Kind: "evaluation"})
			for i, g := range append([]commands.Envelope{open}, c.given...) {
				evs, err := account.Decide(s, g)
				if err != nil {
					t.Fatalf("given %d: %v", i, err)
				}
				for _, e := range evs {
					s = account.Apply(s, e)
				}
			}
			evs, err := account.Decide(s, c.when)
			var ref *commands.Refusal
			var replay *commands.Replay
			switch {
			case c.wantCode != "":
				if !errors.As(err, &ref) || string(ref.Code) != c.wantCode || len(evs) != 0 {
					t.Fatalf("want %s, got %v %v", c.wantCode, evs, err)
				}
			case c.wantTypes == "":
				if !errors.As(err, &replay) || replay.Status != 200 || string(replay.Body) != c.wantBody {
					t.Fatalf("want the replay of %s, got %v %v", c.wantBody, evs, err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				var types []string
				for _, e := range evs {
					types = append(types, e.Type())
					if k, ok := e.(evidem.KeyUsed); ok && (k.Status != 200 || string(k.Body) != c.wantBody || k.Key != "k1" || k.Digest != "d1") {
						t.Fatalf("key used %+v, body %s", k, k.Body)
					}
				}
				if fmt.Sprint(types) != c.wantTypes {
					t.Fatalf("recorded %v, want %s", types, c.wantTypes)
				}
			}
		})
	}
}
