package tradovate

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"sync"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
)

// session is one account of a login. Safe for concurrent use.
type session struct {
	p     *Provider
	l     *login
	acct  account
	unsub func()

	mu      sync.Mutex
	orderOf map[string]eid // clOrdId → order id, learnt at Place and Lookup
	clOrdOf map[eid]string

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup
}

var (
	_ provider.Session         = (*session)(nil)
	_ provider.QuoteSession    = (*session)(nil)
	_ provider.ContractSession = (*session)(nil)
)

func newSession(p *Provider, l *login, a account, renewed func(provider.Token)) *session {
	return &session{p: p, l: l, acct: a, unsub: l.subscribe(renewed), orderOf: map[string]eid{}, clOrdOf: map[eid]string{},
		closed: make(chan struct{})}
}

// learn records an order's clOrdId.
func (s *session) learn(clOrdID string, oid eid) {
	if clOrdID == "" || oid <= 0 {
		return
	}
	s.mu.Lock()
	s.orderOf[clOrdID] = oid
	s.clOrdOf[oid] = clOrdID
	s.mu.Unlock()
}

// Settings implements provider.Session. A futures account has no hedge,
// multi-assets or portfolio-margin modes: the answer is the zero Settings
// once the account reads (GET /account/item).
func (s *session) Settings(ctx context.Context) (provider.Settings, error) {
	var a account
	if err := s.l.get(ctx, "/account/item", idQuery("id", s.acct.ID), &a); err != nil {
		return provider.Settings{}, err
	}
	if a.ID != s.acct.ID {
		return provider.Settings{}, provider.NewUnavailable(http.StatusOK, 0, errMalformed)
	}
	return provider.Settings{}, nil
}

// Snapshot implements provider.Session: the cash balance snapshot, the
// positions (position/deps) and every working order (order/deps with each
// working order's version, New command and fills), each read whole; any
// failure fails the snapshot.
func (s *session) Snapshot(ctx context.Context) (provider.Snapshot, error) {
	snap := provider.Snapshot{At: s.p.opts.Now().UTC()}
	var cash cashBalanceSnapshot
	err := s.l.call(ctx, request{op: opRead, method: http.MethodPost, path: "/cashBalance/getcashbalancesnapshot",
		body: accountRef{AccountID: s.acct.ID}}, &cash)
	if err != nil {
		return provider.Snapshot{}, err
	}
	if cash.ErrorText != "" || !cash.TotalCashValue.ok {
		return provider.Snapshot{}, provider.NewUnavailable(http.StatusOK, 0, errMalformed)
	}
	snap.Balances = []provider.Balance{balanceOf(cash)}
	var pos []position
	if err := s.l.get(ctx, "/position/deps", idQuery("masterid", s.acct.ID), &pos); err != nil {
		return provider.Snapshot{}, err
	}
	for _, p := range pos {
		if p.AccountID != 0 && p.AccountID != s.acct.ID {
			continue
		}
		if !p.NetPos.ok || p.NetPos.dec().IsZero() {
			continue
		}
		name, err := s.l.contractName(ctx, p.ContractID)
		if err != nil {
			return provider.Snapshot{}, err
		}
		vpp, err := s.l.valuePerPoint(ctx, p.ContractID)
		if err != nil {
			return provider.Snapshot{}, err
		}
		snap.Positions = append(snap.Positions, provider.Position{Instrument: name, Quantity: p.NetPos.dec(), EntryPrice: p.NetPrice.dec(),
			ValuePerPoint: vpp})
	}
	orders, err := s.orders(ctx)
	if err != nil {
		return provider.Snapshot{}, err
	}
	for _, o := range orders {
		if st, _ := fromStatus(o.OrdStatus, events.Decimal{}, events.Decimal{}); st.Final() {
			continue
		}
		state, err := s.state(ctx, o)
		if err != nil {
			return provider.Snapshot{}, err
		}
		if !state.Status.Final() {
			snap.Orders = append(snap.Orders, state)
		}
	}
	return snap, nil
}

// balanceOf is the account's cash as the engine's balance: the wallet is
// the total cash value, the available amount the net liquidation value
// less the initial margin, the unrealized the open P&L. The API gives the
// snapshot in US dollars.
func balanceOf(c cashBalanceSnapshot) provider.Balance {
	b := provider.Balance{Asset: "USD", Wallet: c.TotalCashValue.dec(), Unrealized: c.OpenPnL.dec()}
	if c.NetLiq.ok {
		b.Available = c.NetLiq.dec().Sub(c.InitialMargin.dec())
	} else {
		b.Available = b.Wallet.Sub(c.InitialMargin.dec())
	}
	return b
}

// orders reads the account's orders (GET /order/deps?masterid=).
func (s *session) orders(ctx context.Context) ([]order, error) {
	var os []order
	if err := s.l.get(ctx, "/order/deps", idQuery("masterid", s.acct.ID), &os); err != nil {
		return nil, err
	}
	out := os[:0]
	for _, o := range os {
		if o.AccountID == 0 || o.AccountID == s.acct.ID {
			out = append(out, o)
		}
	}
	return out, nil
}

// state reads what makes an order's state besides the order itself: its
// versions, its New command's clOrdId (unless known) and its fills.
func (s *session) state(ctx context.Context, o order) (provider.OrderState, error) {
	p := &orderParts{o: o}
	var err error
	if p.name, err = s.l.contractName(ctx, o.ContractID); err != nil {
		return provider.OrderState{}, err
	}
	if p.vpp, err = s.l.valuePerPoint(ctx, o.ContractID); err != nil {
		return provider.OrderState{}, err
	}
	var vs []orderVersion
	if err := s.l.get(ctx, "/orderVersion/deps", idQuery("masterid", o.ID), &vs); err != nil {
		return provider.OrderState{}, err
	}
	for _, v := range vs {
		p.version(v)
	}
	s.mu.Lock()
	p.clOrdID = s.clOrdOf[o.ID]
	s.mu.Unlock()
	if p.clOrdID == "" {
		var cmds []command
		if err := s.l.get(ctx, "/command/deps", idQuery("masterid", o.ID), &cmds); err != nil {
			return provider.OrderState{}, err
		}
		p.clOrdID = newCommandClOrdID(cmds)
		s.learn(p.clOrdID, o.ID)
	}
	var fs []fill
	if err := s.l.get(ctx, "/fill/deps", idQuery("masterid", o.ID), &fs); err != nil {
		return provider.OrderState{}, err
	}
	for _, f := range fs {
		p.fill(f)
	}
	st, err := p.state()
	if err != nil {
		return provider.OrderState{}, provider.NewUnavailable(http.StatusOK, 0, err)
	}
	return st, nil
}

// Place implements provider.Session: POST /order/placeorder with clOrdId
// the engine's client order id, sent once. Its answer holds the order's id
// alone, so the state returned is the order as sent, working; its fills and
// any later end arrive on Events and are read by Lookup.
func (s *session) Place(ctx context.Context, o provider.Order) (provider.OrderState, error) {
	r, err := toPlace(o, s.acct)
	if err != nil {
		return provider.OrderState{}, err
	}
	if o.ReduceOnly {
		if err := s.reduces(ctx, o); err != nil {
			return provider.OrderState{}, err
		}
	}
	var res placeOrderResult
	if err := s.l.call(ctx, request{op: opPlace, method: http.MethodPost, path: "/order/placeorder", body: r}, &res); err != nil {
		return provider.OrderState{}, err
	}
	if err := mapFailure(opPlace, res.FailureReason); err != nil {
		return provider.OrderState{}, err
	}
	if res.OrderID <= 0 {
		if res.ErrorText != "" || res.FailureText != "" {
			return provider.OrderState{}, &provider.Rejected{Code: codeErrorText}
		}
		// Accepted with no id, or an answer of another shape: what
		// happened is read, never sent again.
		return provider.OrderState{}, provider.NewUnknown(string(opPlace), http.StatusOK, 0, errMalformed)
	}
	s.learn(o.ClientOrderID, res.OrderID)
	st := provider.OrderState{ClientOrderID: o.ClientOrderID, ProviderOrderID: res.OrderID.String(), Instrument: o.Instrument,
		Side: o.Side, Type: o.Type, TIF: o.TIF, Status: provider.StatusWorking, Quantity: o.Quantity,
		LimitPrice: o.LimitPrice, StopPrice: o.StopPrice, ReduceOnly: o.ReduceOnly, UpdatedAt: s.p.opts.Now().UTC()}
	return st, nil
}

// reduces checks, by reading the account's positions, that a reduce-only
// order reduces the position in its contract (opposite side, at most its
// size): Tradovate has no reduce-only flag. One that would not is
// *provider.Rejected with codeWouldNotReduce.
func (s *session) reduces(ctx context.Context, o provider.Order) error {
	k, err := s.l.contractByName(ctx, o.Instrument)
	if errors.Is(err, provider.ErrNotFound) {
		return &provider.Rejected{Code: reasonCodes["InvalidContract"]}
	}
	if err != nil {
		return err
	}
	var pos []position
	if err := s.l.get(ctx, "/position/deps", idQuery("masterid", s.acct.ID), &pos); err != nil {
		return err
	}
	var net events.Decimal
	for _, p := range pos {
		if p.ContractID == k.ID && (p.AccountID == 0 || p.AccountID == s.acct.ID) {
			net = net.Add(p.NetPos.dec())
		}
	}
	if (o.Side == provider.Sell && net.Sign() > 0 || o.Side == provider.Buy && net.Sign() < 0) && o.Quantity.Cmp(net.Abs()) <= 0 {
		return nil
	}
	return &provider.Rejected{Code: codeWouldNotReduce}
}

// Cancel implements provider.Session: POST /order/cancelorder for the
// order found by its clOrdId, sent once, then the order read. Its state
// after an accepted cancel that cannot be read is *provider.Unknown (the
// engine reads it by Lookup), never a failure that says nothing was done.
func (s *session) Cancel(ctx context.Context, instrument, clientOrderID string) (provider.OrderState, error) {
	o, err := s.find(ctx, clientOrderID)
	if err != nil {
		return provider.OrderState{}, err
	}
	var res commandResult
	err = s.l.call(ctx, request{op: opCancel, method: http.MethodPost, path: "/order/cancelorder",
		body: cancelOrder{OrderID: o.ID, IsAutomated: true}}, &res)
	if err != nil {
		return provider.OrderState{}, err
	}
	if err := s.commandFailure(opCancel, res); err != nil {
		return provider.OrderState{}, err
	}
	return s.after(ctx, opCancel, o.ID)
}

// commandFailure maps a CommandResult's failure.
func (s *session) commandFailure(o op, res commandResult) error {
	if err := mapFailure(o, res.FailureReason); err != nil {
		return err
	}
	if res.CommandID <= 0 && (res.ErrorText != "" || res.FailureText != "") {
		return &provider.Rejected{Code: codeErrorText}
	}
	return nil
}

// after reads an order after an accepted write; a read that fails is
// *provider.Unknown: the write was taken, its effect is read by Lookup.
func (s *session) after(ctx context.Context, w op, oid eid) (provider.OrderState, error) {
	var o order
	err := s.l.get(ctx, "/order/item", idQuery("id", oid), &o)
	if err == nil && o.ID != oid {
		err = errMalformed
	}
	var st provider.OrderState
	if err == nil {
		st, err = s.state(ctx, o)
	}
	if err != nil {
		return provider.OrderState{}, provider.NewUnknown(string(w), http.StatusOK, 0, err)
	}
	return st, nil
}

// Replace implements provider.Session with POST /order/modifyorder: the new
// quantity and limit price of a limit or stop-limit order (a stop-limit
// keeps its stop), sent once, then the order read.
func (s *session) Replace(ctx context.Context, r provider.Replace) (provider.OrderState, error) {
	if _, ok := sides[r.Side]; !ok {
		return provider.OrderState{}, &provider.Unsupported{Field: "side", Value: string(r.Side)}
	}
	if !wholePositive(r.Quantity) || r.LimitPrice.Sign() <= 0 {
		return provider.OrderState{}, &provider.Unsupported{Field: "quantity", Value: r.Quantity.String()}
	}
	o, err := s.find(ctx, r.ClientOrderID)
	if err != nil {
		return provider.OrderState{}, err
	}
	var vs []orderVersion
	if err := s.l.get(ctx, "/orderVersion/deps", idQuery("masterid", o.ID), &vs); err != nil {
		return provider.OrderState{}, err
	}
	parts := &orderParts{o: o}
	for _, v := range vs {
		parts.version(v)
	}
	if parts.v == nil {
		return provider.OrderState{}, provider.NewUnavailable(http.StatusOK, 0, errMalformed)
	}
	m := modifyOrder{OrderID: o.ID, OrderQty: numOf(r.Quantity), OrderType: parts.v.OrderType, TimeInForce: parts.v.TimeInForce, IsAutomated: true}
	price := numOf(r.LimitPrice)
	switch parts.v.OrderType {
	case "Limit":
		m.Price = &price
	case "StopLimit":
		stop := parts.v.StopPrice
		m.Price, m.StopPrice = &price, &stop
	default:
		return provider.OrderState{}, &provider.Unsupported{Field: "orderType", Value: string(fromType(parts.v.OrderType))}
	}
	var res commandResult
	if err := s.l.call(ctx, request{op: opReplace, method: http.MethodPost, path: "/order/modifyorder", body: m}, &res); err != nil {
		return provider.OrderState{}, err
	}
	if err := s.commandFailure(opReplace, res); err != nil {
		return provider.OrderState{}, err
	}
	return s.after(ctx, opReplace, o.ID)
}

// Lookup implements provider.Session: the order whose New command carries
// clOrdId (see find) and its state. It never sends an order.
func (s *session) Lookup(ctx context.Context, instrument, clientOrderID string) (provider.OrderState, error) {
	o, err := s.find(ctx, clientOrderID)
	if err != nil {
		return provider.OrderState{}, err
	}
	return s.state(ctx, o)
}

// find reads the account's order whose New command has clOrdId: known
// from Place or an earlier lookup, else found in the login's commands
// (GET /command/list). *provider.NotFound when the API has none, or it is
// another account's.
func (s *session) find(ctx context.Context, clOrdID string) (order, error) {
	if clOrdID == "" {
		return order{}, &provider.NotFound{}
	}
	s.mu.Lock()
	oid, ok := s.orderOf[clOrdID]
	s.mu.Unlock()
	if !ok {
		var cmds []command
		if err := s.l.get(ctx, "/command/list", nil, &cmds); err != nil {
			return order{}, err
		}
		sort.Slice(cmds, func(i, j int) bool { return cmds[i].ID < cmds[j].ID })
		for _, c := range cmds {
			if c.CommandType == "New" && c.ClOrdID == clOrdID && c.OrderID > 0 {
				oid, ok = c.OrderID, true
				break
			}
		}
		if !ok {
			return order{}, &provider.NotFound{}
		}
	}
	var o order
	if err := s.l.get(ctx, "/order/item", idQuery("id", oid), &o); err != nil {
		return order{}, err
	}
	if o.ID != oid || (o.AccountID != 0 && o.AccountID != s.acct.ID) {
		return order{}, &provider.NotFound{}
	}
	s.learn(clOrdID, oid)
	return o, nil
}

// Executions implements provider.Session: the account's active fills of
// the instrument (fill/list, kept to the account's orders of the contract)
// after the cursor, oldest first. The cursor is the next fill id to read.
// Fees are not in a fill (FillFee is its own entity): zero.
func (s *session) Executions(ctx context.Context, instrument string, since provider.Cursor, limit int) ([]provider.Execution, provider.Cursor, error) {
	var from eid
	if since != "" {
		n, err := strconv.ParseInt(string(since), 10, 64)
		if err != nil || n < 0 {
			return nil, since, &provider.Unsupported{Field: "cursor", Value: string(since)}
		}
		from = eid(n)
	}
	if limit <= 0 {
		limit = 500
	}
	k, err := s.l.contractByName(ctx, instrument)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, since, nil
	}
	if err != nil {
		return nil, since, err
	}
	orders, err := s.orders(ctx)
	if err != nil {
		return nil, since, err
	}
	mine := map[eid]*orderParts{}
	for _, o := range orders {
		if o.ContractID == k.ID {
			mine[o.ID] = &orderParts{o: o, name: k.Name}
		}
	}
	var fs []fill
	if err := s.l.get(ctx, "/fill/list", nil, &fs); err != nil {
		return nil, since, err
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].ID < fs[j].ID })
	var page []fill
	for _, f := range fs {
		if f.ID < from || !f.active() || mine[f.OrderID] == nil {
			continue
		}
		page = append(page, f)
		if len(page) == limit {
			break
		}
	}
	out := make([]provider.Execution, 0, len(page))
	next := since
	for _, f := range page {
		p := mine[f.OrderID]
		if p.clOrdID == "" {
			s.mu.Lock()
			p.clOrdID = s.clOrdOf[f.OrderID]
			s.mu.Unlock()
		}
		if p.clOrdID == "" {
			var cmds []command
			if err := s.l.get(ctx, "/command/deps", idQuery("masterid", f.OrderID), &cmds); err != nil {
				return nil, since, err
			}
			p.clOrdID = newCommandClOrdID(cmds)
			s.learn(p.clOrdID, f.OrderID)
		}
		e, err := execution(f, p)
		if err != nil {
			return nil, since, provider.NewUnavailable(http.StatusOK, 0, err)
		}
		out = append(out, e)
		next = provider.Cursor(strconv.FormatInt(int64(f.ID)+1, 10))
	}
	return out, next, nil
}

// Close implements provider.Session: it ends the streams, waits for them,
// and lets the login go when it was its last session.
func (s *session) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.unsub()
		s.wg.Wait()
		s.p.detach(s.l)
	})
	return nil
}
