package tradovate

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
)

// Events implements provider.Session: the user-data socket. It authorizes
// with the login's token, asks user/syncrequest for the login's entities
// (the answer seeds the account's orders, versions, commands and fills),
// and then turns the props events of the account's entities into the
// engine's events: an order, its version or its fill into an OrderUpdate
// (a new fill with its Execution), a position or a cash balance into an
// AccountUpdate. Entities of the login's other accounts are left out. It
// returns once the first socket is live (so a Snapshot taken after it
// misses nothing). After a cut (a dropped connection, a close frame, four
// heartbeats of silence) it dials again with backoff, syncs again, and
// delivers a *provider.Gap once live. Events arrive as the API sends them:
// a duplicated fill is delivered once, and an update of an order composes
// what the stream has said of it so far.
func (s *session) Events(ctx context.Context) (<-chan provider.Event, error) {
	sock, tr, err := s.openUser(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan provider.Event, eventBuffer)
	adapterkit.Go(&s.wg, ctx, s.closed, func(ctx context.Context) {
		defer close(out)
		for {
			live := s.p.opts.Now().UTC()
			s.readUser(ctx, sock, tr, out)
			sock.close()
			cause := sock.why()
			if !adapterkit.Redial(ctx, s.closed, s.p.opts.Reconnect, func() (err error) {
				sock, tr, err = s.openUser(ctx)
				return err
			}, nil) {
				return
			}
			if !adapterkit.Send[provider.Event](ctx, out, &provider.Gap{Since: live, At: s.p.opts.Now().UTC(), Cause: cause}) {
				sock.close()
				return
			}
		}
	})
	return out, nil
}

// openUser dials the user-data socket and syncs. A token the socket does
// not take is renewed once and the dial tried again.
func (s *session) openUser(ctx context.Context) (*socket, *tracker, error) {
	used := s.l.token().Access
	sock, err := s.p.openSocket(ctx, s.l.b, s.p.opts.WSURL, used)
	if errors.Is(err, errExpired) {
		if rerr := s.l.renew(ctx, used); rerr != nil {
			return nil, nil, rerr
		}
		sock, err = s.p.openSocket(ctx, s.l.b, s.p.opts.WSURL, s.l.token().Access)
	}
	if err != nil {
		return nil, nil, mapError(opRead, err)
	}
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	r, err := sock.requestJSON(cctx, "user/syncrequest", syncRequest{Users: []eid{s.l.uid}})
	if err == nil {
		err = replyError(s.l.b, "user/syncrequest", r)
	}
	var sync syncMessage
	if err == nil && json.Unmarshal(r.data, &sync) != nil {
		err = errMalformed
	}
	if err != nil {
		sock.close()
		return nil, nil, mapError(opRead, err)
	}
	tr := newTracker(s)
	tr.seed(ctx, sync)
	return sock, tr, nil
}

// readUser turns the socket's events into the engine's until it ends.
func (s *session) readUser(ctx context.Context, sock *socket, tr *tracker, out chan<- provider.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-sock.events:
			if !ok {
				return
			}
			if ev.name != "props" {
				continue
			}
			for _, e := range tr.props(ctx, ev.data) {
				if !adapterkit.Send(ctx, out, e) {
					return
				}
			}
		}
	}
}

// props is a props event: one entity created, updated or deleted.
type props struct {
	EntityType string          `json:"entityType"`
	EventType  string          `json:"eventType"`
	Entity     json.RawMessage `json:"entity"`
}

// tracker composes the account's orders from what the stream says of
// them. An entity of an order not seen yet (a version, a command, a fill
// arriving before its order) waits for the order; it is dropped with it
// if the order is another account's. Owned by the stream's goroutine.
type tracker struct {
	s       *session
	orders  map[eid]*orderParts
	others  map[eid]bool // orders of the login's other accounts
	pending map[eid][]props
	seen    map[eid]bool // fills delivered
}

func newTracker(s *session) *tracker {
	return &tracker{s: s, orders: map[eid]*orderParts{}, others: map[eid]bool{}, pending: map[eid][]props{}, seen: map[eid]bool{}}
}

// seed takes the sync answer: the account's orders with their versions,
// commands and fills (fills in it are taken as delivered).
func (t *tracker) seed(ctx context.Context, m syncMessage) {
	for _, k := range m.Contracts {
		t.s.p.cat.putContract(k)
	}
	t.s.p.cat.putSpec(m.Maturities, m.Products)
	for _, o := range m.Orders {
		if o.AccountID != t.s.acct.ID {
			t.others[o.ID] = true
			continue
		}
		t.orders[o.ID] = &orderParts{o: o}
	}
	for _, v := range m.OrderVersions {
		if p := t.orders[v.OrderID]; p != nil {
			p.version(v)
		}
	}
	for _, c := range m.Commands {
		if p := t.orders[c.OrderID]; p != nil && c.CommandType == "New" && c.ClOrdID != "" {
			p.clOrdID = c.ClOrdID
			t.s.learn(c.ClOrdID, c.OrderID)
		}
	}
	for _, f := range m.Fills {
		if p := t.orders[f.OrderID]; p != nil {
			p.fill(f)
			t.seen[f.ID] = true
		}
	}
	for _, p := range t.orders {
		p.name, _ = t.s.l.contractName(ctx, p.o.ContractID)
		p.vpp, _ = t.s.l.valuePerPoint(ctx, p.o.ContractID) // zero, unread: the engine's catalog or 1
	}
}

// props turns one props event into the engine's events.
func (t *tracker) props(ctx context.Context, raw json.RawMessage) []provider.Event {
	var ev props
	if json.Unmarshal(raw, &ev) != nil {
		return nil
	}
	return t.apply(ctx, ev)
}

func (t *tracker) apply(ctx context.Context, ev props) []provider.Event {
	switch ev.EntityType {
	case "order":
		var o order
		if json.Unmarshal(ev.Entity, &o) != nil || o.ID <= 0 {
			return nil
		}
		if o.AccountID != t.s.acct.ID {
			t.others[o.ID] = true
			delete(t.pending, o.ID)
			return nil
		}
		p := t.orders[o.ID]
		if p == nil {
			p = &orderParts{o: o}
			t.orders[o.ID] = p
			p.name, _ = t.s.l.contractName(ctx, o.ContractID)
			p.vpp, _ = t.s.l.valuePerPoint(ctx, o.ContractID)
		} else {
			p.o = o
		}
		return append(t.update(p, nil), t.replay(ctx, o.ID)...)
	case "orderVersion":
		var v orderVersion
		if json.Unmarshal(ev.Entity, &v) != nil {
			return nil
		}
		p, ok := t.order(v.OrderID, ev)
		if !ok {
			return nil
		}
		p.version(v)
		return append(t.update(p, nil), t.replay(ctx, v.OrderID)...)
	case "command":
		var c command
		if json.Unmarshal(ev.Entity, &c) != nil || c.CommandType != "New" || c.ClOrdID == "" {
			return nil
		}
		p, ok := t.order(c.OrderID, ev)
		if !ok {
			return nil
		}
		p.clOrdID = c.ClOrdID
		t.s.learn(c.ClOrdID, c.OrderID)
		return nil
	case "fill":
		var f fill
		if json.Unmarshal(ev.Entity, &f) != nil || f.ID <= 0 {
			return nil
		}
		p, ok := t.order(f.OrderID, ev)
		if !ok {
			return nil
		}
		if p.v == nil { // its terms first
			t.pending[f.OrderID] = append(t.pending[f.OrderID], ev)
			return nil
		}
		p.fill(f)
		if !f.active() || t.seen[f.ID] {
			return t.update(p, nil)
		}
		t.seen[f.ID] = true
		e, err := execution(f, p)
		if err != nil {
			return nil
		}
		return t.update(p, &e)
	case "position":
		var pos position
		if json.Unmarshal(ev.Entity, &pos) != nil || pos.AccountID != t.s.acct.ID {
			return nil
		}
		name, err := t.s.l.contractName(ctx, pos.ContractID)
		if err != nil {
			return nil
		}
		vpp, _ := t.s.l.valuePerPoint(ctx, pos.ContractID) // zero, unread: the engine's catalog or 1
		at := pos.Timestamp.UTC()
		return []provider.Event{&provider.AccountUpdate{Reason: "position", At: at,
			Positions: []provider.Position{{Instrument: name, Quantity: pos.NetPos.dec(), EntryPrice: pos.NetPrice.dec(), ValuePerPoint: vpp}}}}
	case "cashBalance":
		var c cashBalance
		if json.Unmarshal(ev.Entity, &c) != nil || c.AccountID != t.s.acct.ID || !c.Amount.ok {
			return nil
		}
		cur, err := t.s.l.currencyName(ctx, c.CurrencyID)
		if err != nil {
			cur = "USD"
		}
		return []provider.Event{&provider.AccountUpdate{Reason: "cash", At: c.Timestamp.UTC(),
			Balances: []provider.Balance{{Asset: cur, Wallet: c.Amount.dec(), AsOf: c.Timestamp.UTC()}}}}
	case "contract":
		var k contract
		if json.Unmarshal(ev.Entity, &k) == nil {
			t.s.p.cat.putContract(k)
		}
	}
	return nil
}

// replay applies what waited for the order, its versions and commands
// first (a fill waits for the order's terms).
func (t *tracker) replay(ctx context.Context, oid eid) []provider.Event {
	q := t.pending[oid]
	if len(q) == 0 {
		return nil
	}
	delete(t.pending, oid)
	sort.SliceStable(q, func(i, j int) bool { return q[i].EntityType != "fill" && q[j].EntityType == "fill" })
	var out []provider.Event
	for _, e := range q {
		out = append(out, t.apply(ctx, e)...)
	}
	return out
}

// maxPending bounds what waits for one unknown order.
const maxPending = 64

// order is the tracked order of an entity, or false: the order is another
// account's, or not seen yet (the entity then waits for it).
func (t *tracker) order(oid eid, ev props) (*orderParts, bool) {
	if p := t.orders[oid]; p != nil {
		return p, true
	}
	if !t.others[oid] && oid > 0 && len(t.pending[oid]) < maxPending {
		t.pending[oid] = append(t.pending[oid], ev)
	}
	return nil, false
}

// update is the order's OrderUpdate (with exec when a fill came); nothing
// until the order's terms (its version) are known.
func (t *tracker) update(p *orderParts, exec *provider.Execution) []provider.Event {
	if p.v == nil {
		return nil
	}
	st, err := p.state()
	if err != nil {
		return nil
	}
	if st.Status == provider.StatusFilled && st.Quantity.Sign() > 0 && st.FilledQuantity.Cmp(st.Quantity) < 0 {
		// Its status came before its last fills (the stream may reorder
		// them): it rests until they come, each with its own update, so
		// the engine never takes it as ended short of its fills.
		st.Status = provider.StatusWorking
		if st.FilledQuantity.Sign() > 0 {
			st.Status = provider.StatusPartiallyFilled
		}
	}
	at := st.UpdatedAt
	if exec != nil {
		at = exec.At
	}
	return []provider.Event{&provider.OrderUpdate{Order: st, Execution: exec, At: at}}
}
