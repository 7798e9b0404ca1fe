package providers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/tradovate"
	"github.com/svc/engine/engine/providers"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

// held is one account's state, decided and folded in memory as the
// engine's mailbox would, handing each commit to the reactor.
type held struct {
	mu  sync.Mutex
	s   *account.State
	r   *providers.Reactor
	evs []events.Event
	n   int
}

func (h *held) exec(cmd commands.Command) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	at := time.Now()
	evs, err := account.Decide(h.s, commands.Envelope{ID: ulid.MustNew(ulid.Timestamp(at), nil), At: at, Cmd: cmd})
	if err != nil {
		return err
	}
	for _, e := range evs {
		h.s = account.Apply(h.s, e)
	}
	h.evs = append(h.evs, evs...)
	if h.r != nil && len(evs) > 0 {
		h.r.Track(h.s.ID, h.s)
	}
	return nil
}

func (h *held) read(f func(*account.State, []events.Event)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h.s, h.evs)
}

func (h *held) count(typ string) int {
	n := 0
	h.read(func(_ *account.State, evs []events.Event) {
		for _, e := range evs {
			if e.Type() == typ {
				n++
			}
		}
	})
	return n
}

// sealedToken "seals" a token as JSON of its fields: the test's vault.
func sealedToken(t provider.Token) []byte {
	b, _ := json.Marshal([]any{t.Access, t.MarketData, t.ExpiresAt, t.UserID, t.Login, t.Environment})
	return b
}

func openToken(b []byte) (provider.Token, error) {
	var f []any
	if err := json.Unmarshal(b, &f); err != nil || len(f) != 6 {
		return provider.Token{}, errors.New("unreadable")
	}
	at, _ := time.Parse(time.RFC3339Nano, f[2].(string))
	return provider.Token{Access: f[0].(string), MarketData: f[1].(string), ExpiresAt: at, UserID: f[3].(string), Login: f[4].(string),
		Environment: f[5].(string)}, nil
}

func eventually(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A login's account at the real adapter and the Tradovate simulator: the
// reactor resumes it from its sealed tokens (no Connect), records each
// renewal as newer sealed tokens, sends an order on it; once the provider
// expires the tokens the order after is not sent and the login is recorded
// lost once, and nothing more is sent; the trader's new sign-in (a relink
// of the same account) resumes it and the next order is placed.
func TestLoginAccountResumesRenewsAndIsLost(t *testing.T) {
	sim, err := tradovatesim.New(tradovatesim.Options{TokenLifetime: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	const password = "reactor-test-password"
	_, accts, err := sim.AddLogin(tradovatesim.Login{Name: "rx", Password: password, Kind: "demo", Accounts: []tradovatesim.AccountSpec{{Name: "DEMO5001"}}})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := tradovate.New(tradovate.Options{Demo: true, RestURL: sim.URL(), WSURL: sim.WSURL(), MDURL: sim.MDURL(), AllowPrivate: true,
		Reconnect: 20 * time.Millisecond, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	signIn := func() provider.Token {
		t.Helper()
		tok, err := tp.Login(context.Background(), "rx", []byte(password))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tok := signIn()
	acct := fmt.Sprint(accts["DEMO5001"])
	link := func(tok provider.Token) *providercmd.Link {
		return &providercmd.Link{Provider: tradovate.Name, Broker: "tradovate", TenantID: "u1", AccountNumber: "TF1", Label: "T", Currency: "USD",
			CredentialID: tok.ID(), Sealed: sealedToken(tok), Snapshot: providercmd.Observe{Cause: account.CauseLink, Complete: true},
			Login: tok.Login, Account: acct, AccountName: "DEMO5001", Environment: tok.Environment, TimeInForce: []string{"day", "gtc"}}
	}
	h := &held{s: account.New("a1")}
	r := providers.New(providers.Config{
		Providers: map[string]provider.Provider{tradovate.Name: tp},
		Open: func(context.Context, string, []byte) (provider.Credentials, error) {
			return provider.Credentials{}, errors.New("a login's account is never connected with a credential")
		},
		Exec:  func(_ context.Context, _ string, c commands.Command) error { return h.exec(c) },
		Retry: 50 * time.Millisecond,
		Logins: providers.LoginConfig{
			Open: func(_ context.Context, _ string, b []byte) (provider.Token, error) { return openToken(b) },
			Seal: func(_ context.Context, _ string, t provider.Token) ([]byte, error) { return sealedToken(t), nil },
		},
	})
	t.Cleanup(r.Close)
	h.r = r
	if err := h.exec(link(tok)); err != nil {
		t.Fatal(err)
	}
	es := sim.FrontContract("ES")
	order := func(id string) {
		t.Helper()
		if err := h.exec(&trading.PlaceOrder{ClientOrderID: id, Instrument: es, Side: "buy", OrderType: "market", Quantity: events.Int(1),
			TimeInForce: "gtc"}); err != nil {
			t.Fatal(err)
		}
	}
	settled := func(id string) string {
		out := ""
		h.read(func(s *account.State, _ []events.Event) {
			if st, ok := s.Provider.Placed[id]; ok { // refused: the state keeps the provider's refusals
				out = st.Outcome
			}
			if s.OrderID(id) != "" { // accepted: the order is in the book (or was, found by the index)
				out = evacct.OutcomeAccepted
			}
			for _, in := range s.OpenIntents() {
				if in.Order.ClientOrderID == id {
					out = "open"
				}
			}
		})
		return out
	}

	order("o-1")
	eventually(t, 5*time.Second, "o-1 accepted", func() bool { return settled("o-1") == evacct.OutcomeAccepted })
	eventually(t, 5*time.Second, "two renewals recorded", func() bool { return h.count("account.provider_token_renewed.v1") >= 2 })
	var last []byte
	h.read(func(s *account.State, _ []events.Event) { last = s.Provider.Sealed })
	if fresh, err := openToken(last); err != nil || !fresh.ExpiresAt.After(tok.ExpiresAt) || fresh.Access == tok.Access {
		t.Fatalf("the account's sealed tokens are not the renewed ones: %v", err)
	}

	sim.ExpireTokens()
	sent := sim.RequestCount("order/placeorder")
	order("o-2")
	eventually(t, 5*time.Second, "the login lost", func() bool {
		lost := false
		h.read(func(s *account.State, _ []events.Event) { lost = s.Provider.LoginLost })
		return lost
	})
	if got := settled("o-2"); got == evacct.OutcomeAccepted {
		t.Fatalf("o-2 settled %q after the tokens expired", got)
	}
	time.Sleep(300 * time.Millisecond)
	if n := h.count("account.provider_login_lost.v1"); n != 1 {
		t.Fatalf("the login was recorded lost %d times", n)
	}
	if n := sim.RequestCount("order/placeorder"); n > sent+1 {
		t.Fatalf("%d orders were sent after the tokens expired", n-sent)
	}

	if err := h.exec(link(signIn())); err != nil { // the trader signs in again
		t.Fatal(err)
	}
	order("o-3")
	eventually(t, 5*time.Second, "o-3 accepted after signing in again", func() bool { return settled("o-3") == evacct.OutcomeAccepted })
	if n := sim.OrdersByClOrdID("DEMO5001", provider.ClientOrderID("a1", "o-3")); n != 1 {
		t.Fatalf("the provider holds %d orders of o-3", n)
	}
}
