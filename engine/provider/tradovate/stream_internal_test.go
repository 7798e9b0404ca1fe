package tradovate

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
)

// newTestSession is a session of account 700001 on a provider that reaches
// no network, its contract library seeded (ESH6 is 3001).
func newTestSession(t *testing.T) *session {
	t.Helper()
	p := testProvider(t, Options{})
	p.cat.putContract(contract{ID: 3001, Name: "ESH6", ContractMaturityID: 40001})
	p.cat.currencies[1] = "USD"
	tok := provider.Token{Access: "a", UserID: "50001", Environment: provider.EnvLive, ExpiresAt: time.Now().Add(time.Hour)}
	l := p.attach(tok)
	s := newSession(p, l, account{ID: 700001, Name: "DEMO700001"}, nil)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// propsEvent is a props event's data as the socket sends it.
func propsEvent(entityType, eventType, entity string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"entityType":%q,"eventType":%q,"entity":%s}`, entityType, eventType, entity))
}

func fillJSON(fid, oid int, qty, price string) string {
	return fmt.Sprintf(`{"id":%d,"orderId":%d,"contractId":3001,"timestamp":"2025-03-03T14:3%d:00Z","tradeDate":{"year":2025,"month":3,"day":3},"action":"Buy","qty":%s,"price":%s,"active":true,"finallyPaired":0}`,
		fid, oid, fid%10, qty, price)
}

func TestUserStreamEvents(t *testing.T) {
	s := newTestSession(t)
	ctx := context.Background()
	var sync syncMessage
	err := json.Unmarshal([]byte(`{
		"users":[{"id":50001,"name":"trader1"}],
		"accounts":[{"id":700001,"name":"DEMO700001","userId":50001},{"id":700002,"name":"DEMO700002","userId":50001}],
		"orders":[
			{"id":2001,"accountId":700001,"contractId":3001,"timestamp":"2025-03-03T14:30:00Z","action":"Buy","ordStatus":"Working","admin":false},
			{"id":2002,"accountId":700002,"contractId":3001,"timestamp":"2025-03-03T14:30:00Z","action":"Sell","ordStatus":"Working","admin":false}],
		"orderVersions":[{"id":4001,"orderId":2001,"orderQty":3,"orderType":"Limit","price":4500.25,"timeInForce":"Day"},
			{"id":4002,"orderId":2002,"orderQty":1,"orderType":"Market"}],
		"commands":[{"id":9001,"orderId":2001,"timestamp":"2025-03-03T14:30:00Z","clOrdId":"sva","commandType":"New","commandStatus":"AtExecution"}],
		"fills":[`+fillJSON(5001, 2001, "1", "4500.25")+`],
		"contracts":[{"id":3001,"name":"ESH6","contractMaturityId":40001}]}`), &sync)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker(s)
	tr.seed(ctx, sync)

	type step struct {
		name  string
		ev    json.RawMessage
		check func(t *testing.T, evs []provider.Event)
	}
	none := func(t *testing.T, evs []provider.Event) {
		t.Helper()
		if len(evs) != 0 {
			t.Fatalf("events %#v, want none", evs)
		}
	}
	order := func(status provider.Status, filled, execID string) func(t *testing.T, evs []provider.Event) {
		return func(t *testing.T, evs []provider.Event) {
			t.Helper()
			if len(evs) == 0 {
				t.Fatal("no event")
			}
			u, ok := evs[len(evs)-1].(*provider.OrderUpdate)
			if !ok {
				t.Fatalf("event %#v, want an OrderUpdate", evs[len(evs)-1])
			}
			if u.Order.Status != status || u.Order.FilledQuantity.String() != filled {
				t.Errorf("order %+v, want %s filled %s", u.Order, status, filled)
			}
			switch {
			case execID == "" && u.Execution != nil:
				t.Errorf("execution %+v, want none", u.Execution)
			case execID != "" && (u.Execution == nil || u.Execution.ID != execID):
				t.Errorf("execution %+v, want %s", u.Execution, execID)
			}
			for _, e := range evs[:len(evs)-1] {
				if x, ok := e.(*provider.OrderUpdate); ok && x.Execution != nil && x.Execution.ID == execID {
					t.Errorf("execution %s delivered twice", execID)
				}
			}
		}
	}
	for _, st := range []step{
		{"a fill the sync held comes again: no new execution", propsEvent("fill", "Created", fillJSON(5001, 2001, "1", "4500.25")),
			order(provider.StatusPartiallyFilled, "1", "")},
		{"a new fill", propsEvent("fill", "Created", fillJSON(5002, 2001, "1", "4500.5")), order(provider.StatusPartiallyFilled, "2", "5002")},
		{"the same fill duplicated", propsEvent("fill", "Created", fillJSON(5002, 2001, "1", "4500.5")), order(provider.StatusPartiallyFilled, "2", "")},
		{"another account's fill", propsEvent("fill", "Created", fillJSON(6001, 2002, "1", "1")), none},
		{"a fill before its order", propsEvent("fill", "Created", fillJSON(5101, 2101, "2", "4499")), none},
		{"its command before its order", propsEvent("command", "Created",
			`{"id":9101,"orderId":2101,"timestamp":"2025-03-03T14:40:00Z","clOrdId":"svb","commandType":"New","commandStatus":"Pending"}`), none},
		{"its version before its order", propsEvent("orderVersion", "Created",
			`{"id":4101,"orderId":2101,"orderQty":2,"orderType":"Market"}`), none},
		{"the order: what waited is applied, the fill once", propsEvent("order", "Created",
			`{"id":2101,"accountId":700001,"contractId":3001,"timestamp":"2025-03-03T14:40:00Z","action":"Buy","ordStatus":"Filled","admin":false}`),
			func(t *testing.T, evs []provider.Event) {
				order(provider.StatusFilled, "2", "5101")(t, evs)
				if u := evs[len(evs)-1].(*provider.OrderUpdate); u.Order.ClientOrderID != "svb" || u.Execution.ClientOrderID != "svb" ||
					u.Order.Type != provider.Market || u.Execution.Price.String() != "4499" || u.Execution.Instrument != "ESH6" {
					t.Errorf("composed order %+v execution %+v", u.Order, u.Execution)
				}
			}},
		{"another account's position", propsEvent("position", "Updated",
			`{"id":8002,"accountId":700002,"contractId":3001,"timestamp":"2025-03-03T14:41:00Z","tradeDate":{"year":2025,"month":3,"day":3},"netPos":-1,"netPrice":4500,"bought":0,"boughtValue":0,"sold":1,"soldValue":4500,"prevPos":0}`), none},
		{"the account's position", propsEvent("position", "Updated",
			`{"id":8001,"accountId":700001,"contractId":3001,"timestamp":"2025-03-03T14:41:00Z","tradeDate":{"year":2025,"month":3,"day":3},"netPos":4,"netPrice":4499.625,"bought":4,"boughtValue":17998.5,"sold":0,"soldValue":0,"prevPos":0}`),
			func(t *testing.T, evs []provider.Event) {
				if len(evs) != 1 {
					t.Fatalf("events %#v", evs)
				}
				u, ok := evs[0].(*provider.AccountUpdate)
				if !ok || len(u.Positions) != 1 || u.Positions[0].Instrument != "ESH6" || u.Positions[0].Quantity.String() != "4" ||
					u.Positions[0].EntryPrice.String() != "4499.625" {
					t.Errorf("position update %#v", evs[0])
				}
			}},
		{"the account's cash", propsEvent("cashBalance", "Updated",
			`{"id":9901,"accountId":700001,"timestamp":"2025-03-03T14:41:00Z","tradeDate":{"year":2025,"month":3,"day":3},"currencyId":1,"amount":50012.5,"realizedPnL":12.5}`),
			func(t *testing.T, evs []provider.Event) {
				u, ok := evs[0].(*provider.AccountUpdate)
				if len(evs) != 1 || !ok || len(u.Balances) != 1 || u.Balances[0].Asset != "USD" || u.Balances[0].Wallet.String() != "50012.5" {
					t.Errorf("cash update %#v", evs)
				}
			}},
		{"the first order ends", propsEvent("order", "Updated",
			`{"id":2001,"accountId":700001,"contractId":3001,"timestamp":"2025-03-03T14:30:00Z","action":"Buy","ordStatus":"Canceled","admin":false}`),
			order(provider.StatusCanceled, "2", "")},
		{"not an event", json.RawMessage(`"x"`), none},
	} {
		t.Run(st.name, func(t *testing.T) { st.check(t, tr.props(ctx, st.ev)) })
	}
}
