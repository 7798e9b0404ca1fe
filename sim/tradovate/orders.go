package tradovate

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/sim/internal/dec"
)

// order is one order with its current version and its place in an OSO or OCO strategy.
type order struct {
	ent       *orderEnt
	version   *orderVersionEnt
	acct      *account
	c         *contract
	action    string // Buy, Sell
	qty       int64
	typ       string // Market, Limit, Stop, StopLimit
	tif       string // Day, GTC, IOC, FOK
	price     *apd.Decimal
	stop      *apd.Decimal
	triggered bool // a StopLimit whose stop was reached rests as a limit
	filled    int64
	avg       *apd.Decimal
	cmdID     int64    // the New command
	children  []*order // OSO brackets, Suspended until this order fills
	linked    *order   // the other order of an OCO pair
}

func (o *order) buy() bool { return o.action == "Buy" }

func (o *order) final() bool {
	switch o.ent.OrdStatus {
	case "Filled", "Canceled", "Rejected", "Expired", "Completed":
		return true
	}
	return false
}

// orderParams is the body of order/placeorder (and the entry order of placeoso and placeoco).
type orderParams struct {
	AccountSpec    string        `json:"accountSpec"`
	AccountID      int64         `json:"accountId"`
	ClOrdID        string        `json:"clOrdId"`
	Action         string        `json:"action"`
	Symbol         string        `json:"symbol"`
	OrderQty       *int64        `json:"orderQty"`
	OrderType      string        `json:"orderType"`
	Price          *num          `json:"price"`
	StopPrice      *num          `json:"stopPrice"`
	MaxShow        *int64        `json:"maxShow"`
	PegDifference  *num          `json:"pegDifference"`
	TimeInForce    string        `json:"timeInForce"`
	ExpireTime     string        `json:"expireTime"`
	Text           string        `json:"text"`
	ActivationTime string        `json:"activationTime"`
	CustomTag50    string        `json:"customTag50"`
	IsAutomated    bool          `json:"isAutomated"`
	Bracket1       *bracketParam `json:"bracket1"`
	Bracket2       *bracketParam `json:"bracket2"`
	Other          *bracketParam `json:"other"`
}

// bracketParam is a RestrainedOrderVersion: an OSO bracket or the other order of an OCO pair.
type bracketParam struct {
	Action      string `json:"action"`
	ClOrdID     string `json:"clOrdId"`
	OrderType   string `json:"orderType"`
	Price       *num   `json:"price"`
	StopPrice   *num   `json:"stopPrice"`
	TimeInForce string `json:"timeInForce"`
	ExpireTime  string `json:"expireTime"`
	Text        string `json:"text"`
}

// failure is a placement refused at the request: HTTP 200 with failureReason and failureText, as
// the provider answers a request that passed the HTTP level but failed a check.
type failure struct{ reason, text string }

func (f *failure) Error() string { return f.reason + ": " + f.text }

func fail(reason, format string, args ...any) *failure {
	return &failure{reason: reason, text: fmt.Sprintf(format, args...)}
}

func (f *failure) answer() answer {
	return ok(map[string]any{"failureReason": f.reason, "failureText": f.text})
}

// spec is an order's validated shape, before it exists.
type spec struct {
	action, typ, tif, text, clOrdID string
	qty                             int64
	price, stop                     *apd.Decimal
}

// checkRequired answers 400 for a missing required field, as the provider's JSON binding does.
func (p *orderParams) checkRequired() *answer {
	for _, f := range []struct {
		name string
		set  bool
	}{{"action", p.Action != ""}, {"symbol", p.Symbol != ""}, {"orderQty", p.OrderQty != nil}, {"orderType", p.OrderType != ""}} {
		if !f.set {
			a := badRequest("No usable value for " + f.name)
			return &a
		}
	}
	for _, f := range []string{p.AccountSpec, p.ClOrdID, p.Symbol, p.Text, p.CustomTag50} {
		if len(f) > 64 {
			a := badRequest("A field is longer than 64 characters")
			return &a
		}
	}
	if p.Action != "Buy" && p.Action != "Sell" {
		a := badRequest("No usable value for action")
		return &a
	}
	return nil
}

// checkSpec validates an order's type, time in force and prices against its contract.
func checkSpec(c *contract, action, typ, tif string, qty int64, price, stop *num) (spec, *failure) {
	sp := spec{action: action, typ: typ, tif: tif, qty: qty}
	if sp.tif == "" {
		sp.tif = "Day" // the docs name no default; Day is the order ticket's
	}
	if qty <= 0 {
		return sp, fail("UnknownReason", "Invalid order quantity %d", qty)
	}
	switch typ {
	case "Market", "Limit", "Stop", "StopLimit":
	default:
		return sp, fail("Unsupported", "Order type %s is not supported", typ)
	}
	switch sp.tif {
	case "Day", "GTC", "IOC", "FOK":
	default:
		return sp, fail("Unsupported", "Time in force %s is not supported", sp.tif)
	}
	tick := c.prod.tick
	need := func(name string, v *num) (*apd.Decimal, *failure) {
		if v == nil {
			return nil, fail("InvalidPrice", "%s is required for a %s order", name, typ)
		}
		d := v.dec()
		if d.Negative || d.IsZero() {
			return nil, fail("InvalidPrice", "%s %s must be positive", name, dec.Plain(d))
		}
		if !dec.IsMultiple(d, tick) {
			return nil, fail("InvalidPrice", "%s %s is not a multiple of the tick size %s", name, dec.Plain(d), dec.Plain(tick))
		}
		return d, nil
	}
	var f *failure
	if typ == "Limit" || typ == "StopLimit" {
		if sp.price, f = need("Price", price); f != nil {
			return sp, f
		}
	}
	if typ == "Stop" || typ == "StopLimit" {
		if sp.stop, f = need("Stop price", stop); f != nil {
			return sp, f
		}
	}
	return sp, nil
}

// resolveAccount finds the account an order names: accountId, else accountSpec (an account name, or
// the login's name for its first account).
func (s *Sim) resolveAccount(u *user, id int64, specName string) (*account, *failure) {
	if id != 0 {
		a := s.accounts[id]
		if a == nil || a.user != u {
			return nil, fail("UnknownReason", "Access is denied")
		}
		return a, nil
	}
	if specName == "" {
		return nil, fail("UnknownReason", "accountId or accountSpec is required")
	}
	for _, a := range u.accounts {
		if a.name == specName {
			return a, nil
		}
	}
	if specName == u.name && len(u.accounts) > 0 {
		return u.accounts[0], nil
	}
	return nil, fail("UnknownReason", "Access is denied")
}

// checkEntry validates an entry order at placement: account, session, contract, shape, limits.
func (s *Sim) checkEntry(u *user, p *orderParams, now time.Time) (*account, *contract, spec, *failure) {
	a, f := s.resolveAccount(u, p.AccountID, p.AccountSpec)
	if f != nil {
		return nil, nil, spec{}, f
	}
	if !s.sessionOpen {
		return nil, nil, spec{}, fail("SessionClosed", "The trading session is closed")
	}
	c := s.contracts[strings.ToUpper(p.Symbol)]
	if c == nil {
		return nil, nil, spec{}, fail("InvalidContract", "Unknown symbol %s", p.Symbol)
	}
	if c.expired(now) {
		return nil, nil, spec{}, fail("InvalidContract", "Contract %s has expired", c.name)
	}
	sp, f := checkSpec(c, p.Action, p.OrderType, p.TimeInForce, *p.OrderQty, p.Price, p.StopPrice)
	if f != nil {
		return nil, nil, sp, f
	}
	sp.text, sp.clOrdID = p.Text, p.ClOrdID
	if a.maxPosition > 0 {
		net := a.netPos(c.id)
		if sp.action == "Buy" {
			net += sp.qty
		} else {
			net -= sp.qty
		}
		if net > a.maxPosition || -net > a.maxPosition {
			return nil, nil, sp, fail("MaxPosLimitReached", "Position limit of %d contracts reached", a.maxPosition)
		}
	}
	return a, c, sp, nil
}

// placeOrder answers order/placeorder: {orderId} for an order accepted (it may still be rejected by
// the exchange afterwards), or a failure.
func (s *Sim) placeOrder(u *user, sess *session, body []byte, now time.Time) answer {
	var p orderParams
	if a := decodeBody(body, &p); a != nil {
		return *a
	}
	if a := p.checkRequired(); a != nil {
		return *a
	}
	a, c, sp, f := s.checkEntry(u, &p, now)
	if f != nil {
		return f.answer()
	}
	o := s.newOrder(a, c, sp, sess, p.CustomTag50, p.IsAutomated, nil, now)
	s.accept(o, now)
	return ok(map[string]any{"orderId": o.ent.ID})
}

// newOrder creates an order, its first version and its New command (PendingNew; Suspended for a
// bracket held until its parent fills), records the tag counters and announces them.
func (s *Sim) newOrder(a *account, c *contract, sp spec, sess *session, tag50 string, automated bool, parent *order, now time.Time) *order {
	u := a.user
	status := "PendingNew"
	if parent != nil {
		status = "Suspended"
	}
	o := &order{acct: a, c: c, action: sp.action, qty: sp.qty, typ: sp.typ, tif: sp.tif, price: sp.price, stop: sp.stop, avg: dec.Zero()}
	o.ent = &orderEnt{ID: s.nextID(kindOrder), AccountID: a.id, ContractID: c.id, Timestamp: ts(now), Action: sp.action,
		OrdStatus: status, ExecutionProviderID: 1}
	if parent != nil {
		o.ent.ParentID = parent.ent.ID
	}
	cmd := &commandEnt{ID: s.nextID(kindCommand), OrderID: o.ent.ID, Timestamp: ts(now), ClOrdID: sp.clOrdID, CommandType: "New",
		CommandStatus: "PendingExecution", SenderID: u.id, CustomTag50: tag50, IsAutomated: automated}
	if status == "Suspended" {
		cmd.CommandStatus = "OnHold"
	}
	if sess != nil {
		cmd.UserSessionID = sess.id
	}
	o.cmdID = cmd.ID
	o.version = s.newVersion(o, sp, now)
	u.orders = append(u.orders, o)
	u.commands = append(u.commands, cmd)
	s.byClOrdID.Add(a.name, sp.clOrdID)
	s.byText.Add(a.name, sp.text)
	s.byTag50.Add(a.name, tag50)
	s.emit(u, "command", "Created", cmd)
	s.emit(u, "order", "Created", o.ent)
	s.emit(u, "orderVersion", "Created", o.version)
	return o
}

func (s *Sim) newVersion(o *order, sp spec, _ time.Time) *orderVersionEnt {
	v := &orderVersionEnt{ID: s.nextID(kindVersion), OrderID: o.ent.ID, OrderQty: sp.qty, OrderType: sp.typ,
		Price: dnum(sp.price), StopPrice: dnum(sp.stop), TimeInForce: sp.tif, Text: sp.text}
	o.acct.user.versions = append(o.acct.user.versions, v)
	return v
}

func (s *Sim) command(o *order, id int64) *commandEnt {
	for i := len(o.acct.user.commands) - 1; i >= 0; i-- {
		if c := o.acct.user.commands[i]; c.ID == id {
			return c
		}
	}
	return nil
}

// report records a command report and updates its command's status.
func (s *Sim) report(o *order, cmdID int64, status, reason, text string, now time.Time) {
	u := o.acct.user
	r := &commandReportEnt{ID: s.nextID(kindCommandReport), CommandID: cmdID, Timestamp: ts(now), CommandStatus: status,
		RejectReason: reason, Text: text, OrdStatus: o.ent.OrdStatus}
	u.commandReports = append(u.commandReports, r)
	if c := s.command(o, cmdID); c != nil {
		c.CommandStatus = status
		s.emit(u, "command", "Updated", c)
	}
	s.emit(u, "commandReport", "Created", r)
}

// execution records an execution report for o under command cmdID.
func (s *Sim) execution(o *order, cmdID int64, execType string, now time.Time, mod func(*executionReportEnt)) {
	u := o.acct.user
	td := tradeDateOf(now)
	e := &executionReportEnt{ID: s.nextID(kindExecReport), CommandID: cmdID, Name: o.c.name, AccountID: o.acct.id,
		ContractID: o.c.id, Timestamp: ts(now), TradeDate: &td, OrderID: o.ent.ID, ExecType: execType,
		OrdStatus: o.ent.OrdStatus, Action: o.action, CumQty: o.filled}
	if o.filled > 0 {
		e.AvgPx = dnum(o.avg)
	}
	if mod != nil {
		mod(e)
	}
	u.execReports = append(u.execReports, e)
	s.emit(u, "executionReport", "Created", e)
}

func (s *Sim) emitOrder(o *order, eventType string) { s.emit(o.acct.user, "order", eventType, o.ent) }

// accept runs a New command at the exchange: a rejection the account has queued, a stop already
// through the market, or Working and then a first match (IOC and FOK end there).
func (s *Sim) accept(o *order, now time.Time) {
	a := o.acct
	if len(a.rejectNext) > 0 {
		r := a.rejectNext[0]
		a.rejectNext = a.rejectNext[1:]
		s.reject(o, r.Reason, r.Text, now)
		return
	}
	if o.stop != nil && s.stopReached(o) {
		s.reject(o, "InvalidPrice", "Stop price is at or through the market", now)
		return
	}
	o.ent.OrdStatus = "Working"
	s.report(o, o.cmdID, "AtExecution", "", "", now)
	s.execution(o, o.cmdID, "New", now, nil)
	s.emitOrder(o, "Updated")
	s.tryFill(o, false, now)
	if !o.final() && (o.tif == "IOC" || o.tif == "FOK") {
		s.end(o, o.cmdID, "Canceled", "Canceled", "Not filled immediately", now)
	}
}

// reject ends an accepted order at the exchange: ExecutionRejected, an execution report Rejected with
// its reason, the order Rejected; its held brackets are canceled.
func (s *Sim) reject(o *order, reason, text string, now time.Time) {
	if reason == "" {
		reason = "OtherExecutionRelated"
	}
	if text == "" {
		text = "Rejected by the exchange"
	}
	o.ent.OrdStatus = "Rejected"
	s.report(o, o.cmdID, "ExecutionRejected", reason, text, now)
	s.execution(o, o.cmdID, "Rejected", now, func(e *executionReportEnt) { e.RejectReason, e.Text = reason, text })
	s.emitOrder(o, "Updated")
	s.dropChildren(o, now)
	if o.linked != nil && !o.linked.final() {
		s.end(o.linked, o.linked.cmdID, "Canceled", "Canceled", "Linked order rejected", now)
	}
}

// end finishes a working order (Canceled or Expired) with an execution report under cmdID.
func (s *Sim) end(o *order, cmdID int64, status, execType, text string, now time.Time) {
	o.ent.OrdStatus = status
	s.execution(o, cmdID, execType, now, func(e *executionReportEnt) { e.Text = text })
	s.emitOrder(o, "Updated")
	s.dropChildren(o, now)
}

func (s *Sim) dropChildren(o *order, now time.Time) {
	for _, ch := range o.children {
		if !ch.final() {
			s.end(ch, ch.cmdID, "Canceled", "Canceled", "Parent order ended", now)
		}
	}
}

func (s *Sim) stopReached(o *order) bool {
	p := o.c.mkt.price
	if o.buy() {
		return p.Cmp(o.stop) >= 0
	}
	return p.Cmp(o.stop) <= 0
}

// tryFill fills a working order whole if the driven price allows: a market order at the price; a
// limit that crosses at placement at the price, a resting one at its limit; a stop once reached as
// a market order (Stop) or a limit (StopLimit).
func (s *Sim) tryFill(o *order, resting bool, now time.Time) {
	if o.ent.OrdStatus != "Working" {
		return
	}
	p := o.c.mkt.price
	typ := o.typ
	if (typ == "Stop" || typ == "StopLimit") && !o.triggered {
		if !s.stopReached(o) {
			return
		}
		o.triggered = true
		resting = false
		if typ == "Stop" {
			typ = "Market"
		}
	}
	if typ == "StopLimit" {
		typ = "Limit"
	}
	switch typ {
	case "Market":
		s.fill(o, p, now)
	case "Limit":
		crosses := o.buy() && p.Cmp(o.price) <= 0 || !o.buy() && p.Cmp(o.price) >= 0
		if !crosses {
			return
		}
		px := p
		if resting {
			px = o.price
		}
		s.fill(o, px, now)
	}
}

// match runs the working orders of a contract against its new price, oldest first.
func (s *Sim) match(c *contract, now time.Time) {
	var work []*order
	for _, u := range s.users {
		for _, o := range u.orders {
			if o.c == c && o.ent.OrdStatus == "Working" {
				work = append(work, o)
			}
		}
	}
	sort.Slice(work, func(i, j int) bool { return work[i].ent.ID < work[j].ent.ID })
	for _, o := range work {
		s.tryFill(o, true, now)
	}
}

// fill executes the rest of an order at px: the fill, the execution report, the order Filled, the
// position and cash, then the OSO brackets go to work and the OCO partner is canceled.
func (s *Sim) fill(o *order, px *apd.Decimal, now time.Time) {
	u := o.acct.user
	qty := o.qty - o.filled
	f := &fillEnt{ID: s.nextID(kindFill), OrderID: o.ent.ID, ContractID: o.c.id, Timestamp: ts(now), TradeDate: tradeDateOf(now),
		Action: o.action, Qty: qty, Price: dnum(px), Active: true}
	u.fills = append(u.fills, f)
	o.avg = px
	o.filled = o.qty
	o.ent.OrdStatus = "Filled"
	s.execution(o, o.cmdID, "Trade", now, func(e *executionReportEnt) { e.LastQty, e.LastPx = qty, dnum(px) })
	var cash func()
	if s.opts.PositionBeforeFill || s.stream.BalanceFirst {
		cash = s.applyFill(o.acct, o.c, f, px, now)
	}
	if s.stream.BalanceFirst {
		cash() // the cash balance the fill moved, before the fill and its order
		cash = func() {}
	}
	s.emit(u, "fill", "Created", f)
	s.emitOrder(o, "Updated")
	o.c.mkt.trade(qty, o.buy(), now)
	if cash == nil {
		cash = s.applyFill(o.acct, o.c, f, px, now)
	}
	cash()
	if o.linked != nil && !o.linked.final() {
		s.end(o.linked, o.linked.cmdID, "Canceled", "Canceled", "Linked order filled", now)
	}
	for _, ch := range o.children {
		if ch.ent.OrdStatus != "Suspended" {
			continue
		}
		ch.ent.OrdStatus = "Working"
		s.report(ch, ch.cmdID, "AtExecution", "", "", now)
		s.execution(ch, ch.cmdID, "New", now, nil)
		s.emitOrder(ch, "Updated")
	}
	for _, ch := range o.children {
		s.tryFill(ch, false, now)
	}
}

// modifyParams is the body of order/modifyorder.
type modifyParams struct {
	OrderID     int64  `json:"orderId"`
	ClOrdID     string `json:"clOrdId"`
	OrderQty    *int64 `json:"orderQty"`
	OrderType   string `json:"orderType"`
	Price       *num   `json:"price"`
	StopPrice   *num   `json:"stopPrice"`
	TimeInForce string `json:"timeInForce"`
	Text        string `json:"text"`
	CustomTag50 string `json:"customTag50"`
	IsAutomated bool   `json:"isAutomated"`
}

func (s *Sim) ownOrder(u *user, id int64) (*order, *failure) {
	for _, o := range u.orders {
		if o.ent.ID == id {
			return o, nil
		}
	}
	for _, other := range s.users {
		for _, o := range other.orders {
			if o.ent.ID == id {
				return nil, fail("UnknownReason", "Access is denied")
			}
		}
	}
	return nil, fail("UnknownReason", "Order %d not found", id)
}

func commandResult(f *failure, id int64) answer {
	if f != nil {
		return f.answer()
	}
	return ok(map[string]any{"commandId": id})
}

// modifyOrder answers order/modifyorder: a new order version of a working (or held) order, matched
// again at once; {commandId} or a failure (TooLate for an order no longer working).
func (s *Sim) modifyOrder(u *user, sess *session, body []byte, now time.Time) answer {
	var p modifyParams
	if a := decodeBody(body, &p); a != nil {
		return *a
	}
	if p.OrderID == 0 {
		return badRequest("No usable value for orderId")
	}
	if p.OrderQty == nil {
		return badRequest("No usable value for orderQty")
	}
	if p.OrderType == "" {
		return badRequest("No usable value for orderType")
	}
	o, f := s.ownOrder(u, p.OrderID)
	if f != nil {
		return f.answer()
	}
	if o.final() {
		return fail("TooLate", "Order %d is %s", o.ent.ID, o.ent.OrdStatus).answer()
	}
	tif := p.TimeInForce
	if tif == "" {
		tif = o.tif
	}
	sp, f := checkSpec(o.c, o.action, p.OrderType, tif, *p.OrderQty, p.Price, p.StopPrice)
	if f != nil {
		return f.answer()
	}
	sp.text = p.Text
	if sp.text == "" {
		sp.text = o.version.Text
	}
	cmd := &commandEnt{ID: s.nextID(kindCommand), OrderID: o.ent.ID, Timestamp: ts(now), ClOrdID: p.ClOrdID, CommandType: "Modify",
		CommandStatus: "PendingExecution", SenderID: u.id, CustomTag50: p.CustomTag50, IsAutomated: p.IsAutomated}
	if sess != nil {
		cmd.UserSessionID = sess.id
	}
	u.commands = append(u.commands, cmd)
	s.emit(u, "command", "Created", cmd)
	o.qty, o.typ, o.tif, o.price, o.stop = sp.qty, sp.typ, sp.tif, sp.price, sp.stop
	o.triggered = false
	o.version = s.newVersion(o, sp, now)
	s.emit(u, "orderVersion", "Created", o.version)
	s.report(o, cmd.ID, "AtExecution", "", "", now)
	s.execution(o, cmd.ID, "Replaced", now, nil)
	s.emitOrder(o, "Updated")
	for _, ch := range o.children {
		if ch.ent.OrdStatus == "Suspended" && ch.qty != o.qty {
			ch.qty = o.qty
			chSpec := spec{action: ch.action, typ: ch.typ, tif: ch.tif, qty: ch.qty, price: ch.price, stop: ch.stop, text: ch.version.Text}
			ch.version = s.newVersion(ch, chSpec, now)
			s.emit(u, "orderVersion", "Created", ch.version)
		}
	}
	s.tryFill(o, false, now)
	return commandResult(nil, cmd.ID)
}

// cancelParams is the body of order/cancelorder.
type cancelParams struct {
	OrderID     int64  `json:"orderId"`
	ClOrdID     string `json:"clOrdId"`
	CustomTag50 string `json:"customTag50"`
	IsAutomated bool   `json:"isAutomated"`
}

// cancelOrder answers order/cancelorder: {commandId} and the order Canceled (its held brackets with
// it), or a failure (TooLate for an order no longer working).
func (s *Sim) cancelOrder(u *user, sess *session, body []byte, now time.Time) answer {
	var p cancelParams
	if a := decodeBody(body, &p); a != nil {
		return *a
	}
	if p.OrderID == 0 {
		return badRequest("No usable value for orderId")
	}
	o, f := s.ownOrder(u, p.OrderID)
	if f != nil {
		return f.answer()
	}
	if o.final() {
		return fail("TooLate", "Order %d is %s", o.ent.ID, o.ent.OrdStatus).answer()
	}
	return commandResult(nil, s.cancel(o, sess, p.ClOrdID, p.CustomTag50, p.IsAutomated, now))
}

func (s *Sim) cancel(o *order, sess *session, clOrdID, tag50 string, automated bool, now time.Time) int64 {
	u := o.acct.user
	cmd := &commandEnt{ID: s.nextID(kindCommand), OrderID: o.ent.ID, Timestamp: ts(now), ClOrdID: clOrdID, CommandType: "Cancel",
		CommandStatus: "PendingExecution", SenderID: u.id, CustomTag50: tag50, IsAutomated: automated}
	if sess != nil {
		cmd.UserSessionID = sess.id
	}
	u.commands = append(u.commands, cmd)
	s.emit(u, "command", "Created", cmd)
	o.ent.OrdStatus = "Canceled"
	s.report(o, cmd.ID, "AtExecution", "", "", now)
	s.execution(o, cmd.ID, "Canceled", now, nil)
	s.emitOrder(o, "Updated")
	s.dropChildren(o, now)
	return cmd.ID
}

// liquidateParams is the body of order/liquidateposition.
type liquidateParams struct {
	AccountID   int64  `json:"accountId"`
	ContractID  int64  `json:"contractId"`
	Admin       bool   `json:"admin"`
	CustomTag50 string `json:"customTag50"`
}

// liquidatePosition answers order/liquidateposition: the account's working orders in the contract
// are canceled and a market order closes its position ({orderId}; a failure when flat).
func (s *Sim) liquidatePosition(u *user, sess *session, body []byte, now time.Time) answer {
	var p liquidateParams
	if a := decodeBody(body, &p); a != nil {
		return *a
	}
	a, f := s.resolveAccount(u, p.AccountID, "")
	if f != nil {
		return f.answer()
	}
	c := s.contractsByID[p.ContractID]
	if c == nil {
		return fail("InvalidContract", "Unknown contract %d", p.ContractID).answer()
	}
	for _, o := range u.orders {
		if o.acct == a && o.c == c && !o.final() {
			s.cancel(o, sess, "", p.CustomTag50, true, now)
		}
	}
	net := a.netPos(c.id)
	if net == 0 {
		return fail("UnknownReason", "No position to liquidate").answer()
	}
	sp := spec{action: "Sell", typ: "Market", tif: "Day", qty: net}
	if net < 0 {
		sp.action, sp.qty = "Buy", -net
	}
	o := s.newOrder(a, c, sp, sess, p.CustomTag50, true, nil, now)
	s.accept(o, now)
	return ok(map[string]any{"orderId": o.ent.ID})
}
