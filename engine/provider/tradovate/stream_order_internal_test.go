package tradovate

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/svc/engine/engine/provider"
)

// An order whose Filled status the stream sends before its fills rests
// until they come: it is never reported ended short of its fills, and each
// fill comes with its execution, the last one filling it.
func TestAnOrderFilledBeforeItsFillsRestsUntilThey(t *testing.T) {
	s := newTestSession(t)
	ctx := context.Background()
	var sync syncMessage
	if err := json.Unmarshal([]byte(`{"orders":[],"contracts":[{"id":3001,"name":"ESH6","contractMaturityId":40001}]}`), &sync); err != nil {
		t.Fatal(err)
	}
	tr := newTracker(s)
	tr.seed(ctx, sync)
	last := func(evs []provider.Event) *provider.OrderUpdate {
		t.Helper()
		if len(evs) == 0 {
			t.Fatal("no event")
		}
		u, ok := evs[len(evs)-1].(*provider.OrderUpdate)
		if !ok {
			t.Fatalf("event %#v", evs[len(evs)-1])
		}
		return u
	}
	for _, ev := range []json.RawMessage{
		propsEvent("command", "Created", `{"id":9201,"orderId":2201,"timestamp":"2025-03-03T14:40:00Z","clOrdId":"svc","commandType":"New","commandStatus":"AtExecution"}`),
		propsEvent("orderVersion", "Created", `{"id":4201,"orderId":2201,"orderQty":2,"orderType":"Market"}`),
	} {
		tr.props(ctx, ev)
	}
	for _, step := range []struct {
		name   string
		ev     json.RawMessage
		status provider.Status
		filled string
		exec   string
	}{
		{"the order Filled before any fill rests", propsEvent("order", "Created",
			`{"id":2201,"accountId":700001,"contractId":3001,"timestamp":"2025-03-03T14:40:00Z","action":"Buy","ordStatus":"Filled","admin":false}`),
			provider.StatusWorking, "0", ""},
		{"its first fill: partially filled", propsEvent("fill", "Created", fillJSON(5201, 2201, "1", "4500")), provider.StatusPartiallyFilled, "1", "5201"},
		{"its last fill: filled", propsEvent("fill", "Created", fillJSON(5202, 2201, "1", "4501")), provider.StatusFilled, "2", "5202"},
	} {
		u := last(tr.props(ctx, step.ev))
		if u.Order.Status != step.status || u.Order.FilledQuantity.String() != step.filled {
			t.Errorf("%s: order %s filled %s, want %s filled %s", step.name, u.Order.Status, u.Order.FilledQuantity, step.status, step.filled)
		}
		if (step.exec == "") != (u.Execution == nil) || (u.Execution != nil && u.Execution.ID != step.exec) {
			t.Errorf("%s: execution %+v, want %q", step.name, u.Execution, step.exec)
		}
	}
}
