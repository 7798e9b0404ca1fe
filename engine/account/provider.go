package account

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// KindProvider is the Kind of an account that lives at a provider: its
// clock is observation, its orders go out as intents (the provider
// reactor sends them) and its book is what the provider reports.
const KindProvider = "provider"

// Provider is the provider side of an account's state; nil on the paper book.
type Provider struct {
	Name         string
	CredentialID string
	Sealed       []byte
	Linked       bool
	Settings     evacct.ProviderSettings
	// Intents are the intents not settled yet, by providercmd.IntentKey.
	Intents map[string]evacct.OrderIntended
	// Placed is, by the engine's clientOrderId, a place intent the provider
	// rejected; an accepted one's order is in the clientOrderId index
	// (OrderFor), and a never-sent one is forgotten, so the id can be used
	// again.
	Placed map[string]evacct.IntentSettled
	// Replaced is, by the provider's client order id, how the order's
	// last replace intent settled (the answer to a replace reads it).
	Replaced map[string]evacct.IntentSettled
	// Orders maps the provider's client order id of every order the book
	// holds to its brokerOrderId; those of orders that ended are in the
	// account's index (providerOrderFor, orderindex.go).
	Orders   map[string]string
	Balances map[string]evacct.BalanceObserved
	// Stuck are the orders, by brokerOrderId, whose last cancel did not go
	// through (never sent, or the provider kept the order): the exit pass
	// does not cancel them again by itself (provider_exits.go).
	Stuck map[string]bool
	// Filled is, by instrument, the position the fills imply: the
	// provider's as last reconciled (a complete observation), moved by each
	// fill since. A fill's realized PnL and the position it leaves are
	// reckoned on it rather than on the position the provider last
	// reported, which may already hold that fill: a provider's stream may
	// tell of the position before the fill that moved it.
	Filled map[string]evacct.Position
	// Unreported are the fills the provider's last balance report of the
	// account's currency cannot hold yet (provider_balance.go).
	Unreported []Unreported
	// Login is the link of an account linked through a login (provider_token.go).
	Login
	// Consent is the trader's word on live trading by the Connect app the
	// account was linked through (provider_consent.go).
	Consent LiveConsent
}

// OpenIntents lists the account's unsettled intents, in key order.
func (s *State) OpenIntents() []evacct.OrderIntended {
	if s.Provider == nil {
		return nil
	}
	out := make([]evacct.OrderIntended, 0, len(s.Provider.Intents))
	for _, k := range sortedKeys(s.Provider.Intents) {
		out = append(out, s.Provider.Intents[k])
	}
	return out
}

// ProviderTIFs are the times in force a provider account takes when its
// link names none (Provider.TIFs): a 24/7 exchange has no session day.
var ProviderTIFs = []string{"gtc", "ioc", "fok"}

// applyProvider folds the provider events (Apply's default case).
func applyProvider(s *State, e events.Event) {
	switch e := e.(type) {
	case evacct.ProviderLinked:
		s.Provider = &Provider{Name: e.Provider, CredentialID: e.CredentialID, Sealed: e.Sealed, Linked: true,
			Settings: e.Settings, Intents: map[string]evacct.OrderIntended{}, Placed: map[string]evacct.IntentSettled{},
			Orders: map[string]string{}, Balances: map[string]evacct.BalanceObserved{}, Filled: map[string]evacct.Position{}, Login: loginOf(e)}
	case evacct.ProviderUnlinked:
		if s.Provider != nil {
			s.Provider.Linked, s.Provider.Sealed = false, nil
		}
	case evacct.OrderIntended:
		if s.Provider != nil {
			s.Provider.Intents[providercmd.IntentKey(e.Op, e.ProviderClientOrderID)] = e
			if e.Op == evacct.IntentCancel {
				delete(s.Provider.Stuck, e.Order.BrokerOrderID)
			}
		}
	case evacct.IntentSettled:
		if p := s.Provider; p != nil {
			for _, op := range []string{evacct.IntentPlace, evacct.IntentCancel, evacct.IntentReplace, IntentExit} {
				k := providercmd.IntentKey(op, e.ProviderClientOrderID)
				in, ok := p.Intents[k]
				if !ok {
					continue
				}
				delete(p.Intents, k)
				if op == evacct.IntentPlace && e.Outcome == evacct.OutcomeRejected {
					p.Placed[in.Order.ClientOrderID] = e
				}
				if op == evacct.IntentReplace {
					if p.Replaced == nil {
						p.Replaced = map[string]evacct.IntentSettled{}
					}
					p.Replaced[e.ProviderClientOrderID] = e
				}
				if op == evacct.IntentCancel && e.Outcome != evacct.OutcomeAccepted {
					if p.Stuck == nil {
						p.Stuck = map[string]bool{}
					}
					p.Stuck[in.Order.BrokerOrderID] = true
				}
				break
			}
		}
	case evacct.BalanceObserved:
		if s.Provider != nil {
			applyBalance(s, e) // provider_balance.go: before the report is kept
			s.Provider.Balances[e.Asset] = e
		} else if e.Asset == s.Currency {
			s.Balance = e.Wallet
		}
	case evacct.PositionObserved:
		if e.Position.Quantity.IsZero() {
			delete(s.Positions, e.Position.Instrument)
		} else {
			s.Positions[e.Position.Instrument] = e.Position
		}
	case evacct.SettingsObserved:
		if s.Provider != nil {
			s.Provider.Settings = e.Settings
		}
	case evacct.Reconciled:
		if s.Provider != nil { // the provider's complete reading is what the fills start from again
			s.Provider.Filled = make(map[string]evacct.Position, len(s.Positions))
			for k, v := range s.Positions {
				s.Provider.Filled[k] = v
			}
		}
	default:
		applyProviderToken(s, e) // provider_token.go
	}
}

// applyProviderOrder keeps the provider's client order id of an order the
// book takes in (Apply's OrderPlaced case calls it): an order placed
// elsewhere (adopted, "p-" id) carries the provider's id as its
// clientOrderId; the engine's own derive it.
func applyProviderOrder(s *State, o evacct.Order) {
	if s.Provider == nil {
		return
	}
	s.Provider.Orders[providerKey(s.ID, o)] = o.BrokerOrderID
}

// providerKey is the provider's client order id of a book order.
func providerKey(accountID string, o evacct.Order) string {
	if strings.HasPrefix(o.BrokerOrderID, adoptedPrefix) {
		return o.ClientOrderID
	}
	return providerCOID(accountID, o)
}

// forgetProviderOrder lets a book order that ended leave Provider.Orders,
// which holds the working ones; the index keeps its key (orderindex.go).
func forgetProviderOrder(s *State, o evacct.Order) {
	if s.Provider != nil {
		delete(s.Provider.Orders, providerKey(s.ID, o))
	}
}

// applyProviderFill moves the position the fills imply (Provider.Filled)
// by a fill (Apply's OrderFilled case calls it).
func applyProviderFill(s *State, e evacct.OrderFilled) {
	p := s.Provider
	if p == nil {
		return
	}
	if p.Filled == nil {
		p.Filled = map[string]evacct.Position{}
	}
	if e.Position.Quantity.IsZero() {
		delete(p.Filled, e.Instrument)
	} else {
		p.Filled[e.Instrument] = e.Position
	}
	applyFillMoney(s, e) // provider_balance.go
}

// adoptedPrefix starts the brokerOrderId of an order placed elsewhere.
const adoptedPrefix = "p-"

// decideProvider decides the commands of a provider account and the
// trading commands on one; ok is false for a command it leaves to the
// paper book's decisions (a paper account, or a command that is the same
// on both: risk settings, holds). Every decision it makes ends with the
// exit pass (provider_exits.go).
func decideProvider(s *State, env commands.Envelope) ([]events.Event, bool, error) {
	evs, ok, err := decideProviderCommand(s, env)
	if !ok || err != nil || s.Provider == nil {
		return evs, ok, err
	}
	if c, retry := env.Cmd.(*providercmd.RetryExits); retry {
		return retryExits(s, env, c.Now), true, nil
	}
	return providerExits(s, env, evs), true, nil
}

func decideProviderCommand(s *State, env commands.Envelope) (evs []events.Event, ok bool, err error) {
	if c, is := env.Cmd.(*providercmd.Link); is {
		evs, err = decideLink(s, env, c)
		return evs, true, err
	}
	if s.Provider == nil {
		return nil, false, nil
	}
	if evs, ok, err := decideProviderToken(s, env); ok { // provider_token.go
		return evs, true, err
	}
	p := s.Provider
	switch c := env.Cmd.(type) {
	case *providercmd.Unlink:
		if !p.Linked {
			return nil, true, nil
		}
		return []events.Event{evacct.ProviderUnlinked{At: env.At}}, true, nil
	case *providercmd.Settle:
		evs, err = decideSettle(s, env, c)
		return evs, true, err
	case *providercmd.Observe:
		evs, err = observe(s, env, c)
		return evs, true, err
	case *providercmd.RetryExits:
		return nil, true, nil // the exit pass places the legs due (decideProvider)
	case *trading.PlaceOrder:
		evs, err = decideProviderPlace(s, env, c)
		return evs, true, err
	case *trading.CancelOrder:
		evs, err = decideProviderCancel(s, env, c)
		return evs, true, err
	case *trading.ClosePosition:
		evs, err = decideProviderClose(s, env, c)
		return evs, true, err
	case *trading.FillWorking, *trading.Rebase, *trading.ExpireDayOrders:
		return nil, true, nil // the provider fills and expires its orders; the paper book never does
	case *trading.ReplaceOrder:
		evs, err = decideProviderReplace(s, env, c)
		return evs, true, err
	case *trading.Flatten:
		evs, err = decideProviderFlatten(s, env, c)
		return evs, true, err
	case *trading.Reverse:
		evs, err = decideProviderReverse(s, env, c)
		return evs, true, err
	case *trading.Protect:
		evs, err = decideProviderProtect(s, env, c)
		return evs, true, err
	case *trading.WithdrawBracket:
		evs, err = decideProviderWithdraw(s, env, c)
		return evs, true, err
	case *trading.ChangeBracket:
		evs, err = decideProviderChange(s, env, c)
		return evs, true, err
	}
	return nil, false, nil
}

func decideLink(s *State, env commands.Envelope, c *providercmd.Link) ([]events.Event, error) {
	if s.Open {
		if s.Provider != nil && s.Provider.Linked && s.Provider.CredentialID == c.CredentialID && s.TenantID == c.TenantID {
			return relink(s, env, c), nil // the same link again changes nothing but a login's newer tokens
		}
		return nil, commands.Refuse(commands.CodeIdempotencyConflict, "this account is linked already", nil)
	}
	evs := []events.Event{
		evacct.Opened{AccountID: s.ID, TenantID: c.TenantID, Broker: c.Broker, AccountNumber: c.AccountNumber, Label: c.Label,
			Currency: c.Currency, StartingBalance: events.Int(0), Kind: KindProvider, Email: c.Email, AppID: c.AppID, Trader: c.Trader, At: env.At},
		evacct.ProviderLinked{Provider: c.Provider, CredentialID: c.CredentialID, Sealed: c.Sealed, Login: c.Login, Account: c.Account,
			AccountName: c.AccountName, Environment: c.Environment, TimeInForce: c.TimeInForce, At: env.At},
	}
	// The first reconciliation: the snapshot read at linking, folded on
	// the state the two events above leave.
	linked := Apply(Apply(New(s.ID), evs[0]), evs[1])
	seen, err := observe(linked, env, &c.Snapshot)
	if err != nil {
		return nil, err
	}
	evs = append(evs, seen...)
	return append(evs, linkConsent(LiveConsent{}, env, c, evacct.ConsentLink)...), nil // provider_consent.go
}

// modeRefusal refuses an order on an account whose modes the engine does
// not trade (the settings as last observed).
func modeRefusal(p *Provider, instrument string) error {
	st := provider.Settings{HedgeMode: p.Settings.HedgeMode, MultiAssets: p.Settings.MultiAssets, PortfolioMargin: p.Settings.PortfolioMargin}
	var m *provider.ModeUnsupported
	if err := st.Supported(); err == nil || !errors.As(err, &m) {
		return nil
	}
	return ModeRefusal(p.Name, instrument, m)
}

// ModeRefusal is the spec's refusal of an account mode the engine does not
// trade, with its params provider, instrument, setting, reported, supported.
func ModeRefusal(providerName, instrument string, m *provider.ModeUnsupported) error {
	params := map[string]any{"provider": providerName, "instrument": instrument, "setting": m.Setting, "reported": m.Reported,
		"supported": []string{m.Supported}}
	msg := "the provider account is in a mode the engine does not trade: " + m.Setting + " is " + m.Reported
	switch m.Setting {
	case provider.SettingHedgeMode:
		return commands.Refuse(commands.CodeHedgePositionMode, msg, params)
	case provider.SettingMultiAssets:
		return commands.Refuse(commands.CodeMultiAssetsMode, msg, params)
	}
	return commands.Refuse(commands.CodePortfolioMargin, msg, params)
}

// placedAgain answers a clientOrderId the account used before: its place
// intent still open (outcome_unknown), or how it settled.
func placedAgain(s *State, clientOrderID string) error {
	p := s.Provider
	for _, in := range p.Intents {
		if in.Op == evacct.IntentPlace && in.Order.ClientOrderID == clientOrderID {
			return OutcomeUnknown()
		}
	}
	if st, ok := p.Placed[clientOrderID]; ok && st.Outcome == evacct.OutcomeRejected {
		return OrderRejected(p.Name)
	}
	return idempotent(s, clientOrderID)
}

// OutcomeUnknown is the refusal of an order whose outcome at the provider
// is not known yet: it may rest there.
func OutcomeUnknown() error {
	return commands.Refuse(commands.CodeOutcomeUnknown,
		"the order was sent and its outcome at the provider is not known yet; it may rest there. Read the account stream, or retry with the same clientOrderId", nil)
}

// OrderRejected is the refusal of an order the provider refused itself.
func OrderRejected(providerName string) error {
	return commands.Refuse(commands.CodeOrderRejected, "the provider rejected the order", map[string]any{"provider": providerName})
}

func decideProviderPlace(s *State, env commands.Envelope, c *trading.PlaceOrder) ([]events.Event, error) {
	p := s.Provider
	if err := placedAgain(s, c.ClientOrderID); err != nil {
		return nil, err
	}
	if !p.Linked {
		return nil, commands.Refuse(commands.CodeNotFound, "the account is no longer linked to its provider", nil)
	}
	if tifs := p.TIFs(); !slices.Contains(tifs, c.TimeInForce) && c.OrderType != "market" {
		return nil, commands.Refuse(commands.CodeTimeInForceUnsupported, "the provider has no time in force "+c.TimeInForce,
			map[string]any{"tif": c.TimeInForce, "tifs": tifs})
	}
	if err := modeRefusal(p, c.Instrument); err != nil {
		return nil, err
	}
	if hs := Holds(s, env.At); len(hs) > 0 && !c.ReduceOnly {
		return nil, lockedRefusal(hs)
	}
	o := evacct.Order{BrokerOrderID: env.ID.String(), ClientOrderID: c.ClientOrderID, Instrument: c.Instrument, Side: c.Side,
		OrderType: c.OrderType, Quantity: c.Quantity, LimitPrice: c.LimitPrice, StopPrice: c.StopPrice,
		TimeInForce: c.TimeInForce, ReduceOnly: c.ReduceOnly, CreatedAt: env.At, LeaderOrderID: c.LeaderOrderID}
	var out []events.Event
	if c.Bracket != nil { // the entry and its bracket are one commit; its legs go out once it fills
		set, err := providerEntry(env, c, &o)
		if err != nil {
			return nil, err
		}
		out = append(out, set)
	}
	return append(out, evacct.OrderIntended{Op: evacct.IntentPlace,
		ProviderClientOrderID: provider.ClientOrderID(s.ID, c.ClientOrderID), Order: o, At: env.At}), nil
}

func decideProviderCancel(s *State, env commands.Envelope, c *trading.CancelOrder) ([]events.Event, error) {
	w, ok := s.Working[c.BrokerOrderID]
	if !ok {
		return nil, commands.Refuse(commands.CodeNotFound, "no working order with that brokerOrderId", nil)
	}
	pcoid := providerID(s, w.BrokerOrderID)
	if _, open := s.Provider.Intents[providercmd.IntentKey(evacct.IntentCancel, pcoid)]; open {
		return nil, OutcomeUnknown()
	}
	return []events.Event{evacct.OrderIntended{Op: evacct.IntentCancel, ProviderClientOrderID: pcoid, Order: w.Order, At: env.At}}, nil
}

func decideProviderClose(s *State, env commands.Envelope, c *trading.ClosePosition) ([]events.Event, error) {
	coid := "close-" + env.ID.String()
	if c.ClientOrderID != "" {
		if err := placedAgain(s, c.ClientOrderID); err != nil {
			return nil, err
		}
		coid = c.ClientOrderID
	}
	pos, ok := s.Positions[c.Instrument]
	if !ok {
		return nil, notClosable(c.Instrument)
	}
	if err := closeGate(s, env.At); err != nil {
		return nil, err
	}
	qty := pos.Quantity.Abs()
	if c.Quantity != nil {
		if c.Quantity.Cmp(qty) > 0 {
			return nil, commands.InvalidField("quantity", nil, "quantity %s is above the position's size %s", c.Quantity, qty)
		}
		qty = *c.Quantity
	}
	o := evacct.Order{BrokerOrderID: env.ID.String(), ClientOrderID: coid, Instrument: c.Instrument, Side: sideToClose(pos),
		OrderType: "market", Quantity: qty, TimeInForce: "gtc", ReduceOnly: true, CreatedAt: env.At}
	return []events.Event{evacct.OrderIntended{Op: evacct.IntentPlace,
		ProviderClientOrderID: provider.ClientOrderID(s.ID, coid), Order: o, At: env.At}}, nil
}

// closeGate refuses a close while a risk lock holds (any hold but the
// reconciliation hold, under which closes stay open) on a provider that
// does not enforce reduce-only itself: the engine cannot prove such a close
// only reduces (a fill the provider has not reported yet can leave it
// opening a position the other way), so it is risk_locked answered 409
// (Refusal.Conflict), with params.holds. On a provider that enforces
// reduce-only the close goes as it does unheld.
func closeGate(s *State, at time.Time) error {
	if EnforcesReduceOnly(s.Provider.Name) {
		return nil
	}
	hs := Holds(s, at)
	if !slices.ContainsFunc(hs, func(h string) bool { return h != HoldReconciliation }) {
		return nil
	}
	r := commands.Refuse(commands.CodeRiskLocked,
		"the account is held and its provider does not enforce reduce-only: a close cannot be proved only to reduce until the hold lifts; flatten, or cancel orders",
		map[string]any{"holds": hs})
	r.Conflict = true
	return r
}

// EnforcesReduceOnly reports whether the provider of the name enforces an
// order's reduce-only itself (its capabilities' reduceOnly; a test holds
// the two equal): Binance USDⓈ-M does. Tradovate has no such flag: its
// adapter checks the position before sending, which a fill in between can
// outrun. False for a provider not known to.
func EnforcesReduceOnly(providerName string) bool {
	switch providerName {
	case "binance-futures":
		return true
	}
	return false
}

// providerID is the provider's client order id of a book order.
func providerID(s *State, brokerOrderID string) string {
	if w, ok := s.Working[brokerOrderID]; ok {
		return providerKey(s.ID, w.Order)
	}
	return ""
}

// decideSettle records an intent's end; an accepted one takes its order
// into the book and records what the provider answered of it.
func decideSettle(s *State, env commands.Envelope, c *providercmd.Settle) ([]events.Event, error) {
	in, open := s.Provider.Intents[c.Key]
	if !open {
		if c.Order == nil {
			return nil, nil // settled already (by the stream, or a settlement before)
		}
		return observe(s, env, &providercmd.Observe{Cause: "answer", Orders: []providercmd.Order{*c.Order}})
	}
	o := &observer{s: s, env: env}
	o.add(evacct.IntentSettled{ProviderClientOrderID: in.ProviderClientOrderID, Outcome: c.Outcome, Code: c.Code, Reason: c.Reason, RetryAfter: c.RetryAfter, At: env.At})
	if c.Outcome == evacct.OutcomeAccepted && (in.Op == evacct.IntentPlace || in.Op == IntentExit) {
		o.add(evacct.OrderPlaced{Order: in.Order})
	}
	if c.Order != nil {
		o.order(*c.Order)
	} else if c.Outcome == evacct.OutcomeAccepted && in.Op == evacct.IntentCancel {
		if _, ok := o.state().Working[in.Order.BrokerOrderID]; ok {
			o.add(evacct.OrderCanceled{BrokerOrderID: in.Order.BrokerOrderID, Reason: "requested", At: env.At})
		}
	} else if c.Outcome == evacct.OutcomeAccepted && in.Op == evacct.IntentReplace {
		if _, ok := o.state().Working[in.Order.BrokerOrderID]; ok {
			o.add(evacct.OrderReplaced{BrokerOrderID: in.Order.BrokerOrderID, Quantity: in.Order.Quantity, LimitPrice: in.Order.LimitPrice,
				StopPrice: in.Order.StopPrice, At: env.At})
		}
	}
	return o.out, o.err
}

// observer turns observations into the book's events, folding each on a
// copy of the state as it goes so later ones see earlier ones.
type observer struct {
	s   *State
	st  *State // s with out applied; nil until the first event
	env commands.Envelope
	out []events.Event
	err error // an order's id could not be read back (the log's): nothing is decided
}

func (o *observer) state() *State {
	if o.st == nil {
		return o.s
	}
	return o.st
}

func (o *observer) add(e events.Event) {
	if o.st == nil {
		o.st = view(o.s)
	}
	o.out = append(o.out, e)
	foldView(o.st, e)
}

// view copies what the observer reads as it goes: the book, the balance
// and the provider state. It is no State to Apply to: foldView folds only
// these on it.
func view(s *State) *State {
	c := &State{ID: s.ID, Currency: s.Currency, Balance: s.Balance}
	c.Positions = make(map[string]evacct.Position, len(s.Positions))
	for k, v := range s.Positions {
		c.Positions[k] = v
	}
	c.Working = make(map[string]*Working, len(s.Working))
	for k, v := range s.Working {
		w := *v
		c.Working[k] = &w
	}
	p := *s.Provider
	p.Intents = make(map[string]evacct.OrderIntended, len(s.Provider.Intents))
	for k, v := range s.Provider.Intents {
		p.Intents[k] = v
	}
	p.Placed = map[string]evacct.IntentSettled{} // not read by the observer
	p.Replaced = map[string]evacct.IntentSettled{}
	p.Orders = make(map[string]string, len(s.Provider.Orders))
	for k, v := range s.Provider.Orders {
		p.Orders[k] = v
	}
	p.Balances = make(map[string]evacct.BalanceObserved, len(s.Provider.Balances))
	for k, v := range s.Provider.Balances {
		p.Balances[k] = v
	}
	p.Stuck = make(map[string]bool, len(s.Provider.Stuck))
	for k, v := range s.Provider.Stuck {
		p.Stuck[k] = v
	}
	p.Filled = make(map[string]evacct.Position, len(s.Provider.Filled))
	for k, v := range s.Provider.Filled {
		p.Filled[k] = v
	}
	c.Provider = &p
	return c
}

// foldView folds e on a view as Apply would on the state.
func foldView(s *State, e events.Event) {
	switch e := e.(type) {
	case evacct.OrderPlaced:
		s.Working[e.Order.BrokerOrderID] = &Working{Order: e.Order, UpdatedAt: e.Order.CreatedAt}
		applyProviderOrder(s, e.Order)
	case evacct.OrderFilled:
		s.Balance = e.Balance
		if e.Position.Quantity.IsZero() {
			delete(s.Positions, e.Instrument)
		} else {
			s.Positions[e.Instrument] = e.Position
		}
		applyProviderFill(s, e)
		if w, ok := s.Working[e.BrokerOrderID]; ok {
			if e.Done {
				delete(s.Working, e.BrokerOrderID)
			} else {
				w.Filled, w.AvgPrice = e.OrderFilled, e.OrderAvgPrice
			}
		}
	case evacct.OrderCanceled:
		delete(s.Working, e.BrokerOrderID)
	case evacct.OrderReplaced:
		if w, ok := s.Working[e.BrokerOrderID]; ok {
			w.Quantity, w.LimitPrice, w.StopPrice = e.Quantity, e.LimitPrice, e.StopPrice
		}
	default:
		applyProvider(s, e)
	}
}

func observe(s *State, env commands.Envelope, c *providercmd.Observe) ([]events.Event, error) {
	o := &observer{s: s, env: env}
	seen := map[string]bool{}
	for _, ob := range c.Orders {
		seen[ob.ProviderClientOrderID] = true
		o.order(ob)
	}
	if o.err != nil {
		return nil, o.err
	}
	var why []string
	if c.Complete && c.Cause != CauseLink {
		why = o.unexplained(c)
		o.settleMissing(c)
	}
	if c.Settings != nil && *c.Settings != o.state().Provider.Settings {
		o.add(evacct.SettingsObserved{Settings: *c.Settings, At: env.At})
	}
	for _, b := range c.Balances {
		if balanceNews(o.state(), b) { // provider_balance.go
			b.At = env.At
			o.add(b)
		}
	}
	positions := map[string]bool{}
	for _, p := range c.Positions {
		positions[p.Instrument] = true
		cur := o.state().Positions[p.Instrument]
		if cur.Quantity.Cmp(p.Quantity) != 0 || (!p.Quantity.IsZero() && cur.AvgPrice.Cmp(p.AvgPrice) != 0) {
			if p.Multiplier.IsZero() {
				p.Multiplier = events.Int(1)
			}
			o.add(evacct.PositionObserved{Position: p, At: env.At})
		}
	}
	if c.Complete {
		for _, inst := range sortedKeys(o.state().Positions) {
			if !positions[inst] {
				o.add(evacct.PositionObserved{Position: evacct.Position{Instrument: inst, Quantity: events.Int(0)}, At: env.At})
			}
		}
		n := 0
		for _, ob := range c.Orders {
			if !ob.Final() {
				n++
			}
		}
		o.add(evacct.Reconciled{Cause: c.Cause, Orders: n, Positions: len(c.Positions), At: env.At})
		o.hold(why)
	}
	return o.out, nil
}

// order records one order as the provider reports it: an intent it
// settles (the stream may tell of an order before the answer to its
// request), an order placed elsewhere it adopts, the fill since the last
// report, its end.
func (o *observer) order(ob providercmd.Order) {
	st := o.state()
	p := st.Provider
	in, ok := p.Intents[providercmd.IntentKey(evacct.IntentPlace, ob.ProviderClientOrderID)]
	if !ok {
		in, ok = p.Intents[providercmd.IntentKey(IntentExit, ob.ProviderClientOrderID)]
	}
	if ok {
		o.add(evacct.IntentSettled{ProviderClientOrderID: in.ProviderClientOrderID, Outcome: evacct.OutcomeAccepted, At: o.env.At})
		o.add(evacct.OrderPlaced{Order: in.Order})
		st = o.state()
	}
	id, known := st.Provider.Orders[ob.ProviderClientOrderID] // working, or placed by this observation
	if !known {
		var err error
		if id, known, err = o.s.providerOrderFor(ob.ProviderClientOrderID); err != nil { // ended
			o.err = err
			return
		}
	}
	if !known {
		if ob.Final() && ob.Filled.IsZero() {
			return // an order placed elsewhere that ended without a fill: nothing to keep
		}
		id = adoptedPrefix + ob.ProviderOrderID
		if ob.ProviderOrderID == "" {
			id = adoptedPrefix + ob.ProviderClientOrderID
		}
		otype := ob.OrderType
		if _, ok := order.ParseType(otype); !ok {
			otype = string(order.Limit) // a type the engine has no name for rests like a limit
		}
		o.add(evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: id, ClientOrderID: ob.ProviderClientOrderID, Instrument: ob.Instrument,
			Side: ob.Side, OrderType: otype, Quantity: ob.Quantity, LimitPrice: ob.LimitPrice, StopPrice: ob.StopPrice,
			TimeInForce: ob.TimeInForce, ReduceOnly: ob.ReduceOnly, CreatedAt: ob.At}})
		st = o.state()
	}
	w, working := st.Working[id]
	if !working {
		return // over in the book already: a late or repeated report
	}
	if ob.Filled.Cmp(w.Filled) > 0 {
		delta := ob.Filled.Sub(w.Filled)
		price := fillPrice(w, ob, delta)
		realized := events.Int(0)
		if ob.LastPnL != nil {
			realized = *ob.LastPnL
		}
		// Reckoned on the position before this fill, as the fills imply it:
		// the provider's own report may already hold the fill.
		cur := st.Provider.Filled[w.Instrument]
		if ob.Multiplier.Sign() > 0 {
			cur.Multiplier = ob.Multiplier // a futures contract's value per point
		}
		pos, closed := net(cur, w.Instrument, w.Side, delta, price)
		if ob.LastPnL == nil {
			realized = closed
		}
		money := realized
		var fee *events.Decimal
		if ob.LastFee != nil {
			f := *ob.LastFee
			fee, money = &f, money.Sub(f)
		}
		at := fillTime(ob)
		bal := fillBalance(st, at, money) // provider_balance.go: not again when the provider's balance holds it
		avg := price
		if ob.AvgPrice != nil {
			avg = *ob.AvgPrice
		}
		o.add(evacct.OrderFilled{BrokerOrderID: id, FillID: id + "-" + ob.Filled.String(), Instrument: w.Instrument, Side: w.Side,
			Quantity: delta, Price: price, Realized: realized, Position: pos, Balance: bal, OrderFilled: ob.Filled,
			OrderAvgPrice: avg, Done: ob.Final(), Commission: fee, ProviderAt: at, At: o.env.At})
		return
	}
	if ob.Final() {
		reason := "requested"
		if ob.Status != "canceled" {
			reason = ob.Status
		}
		o.add(evacct.OrderCanceled{BrokerOrderID: id, Reason: reason, At: o.env.At})
	} else if legOrder(w.Order) {
		// A leg rests at the provider as a trigger (a target as a take
		// profit): its level is its trigger, whatever type the provider
		// reports it by (a triggered one reads as a market order).
		lv := ob.LimitPrice
		if lv == nil {
			lv = ob.StopPrice
		}
		if w.Quantity.Cmp(ob.Quantity) != 0 || !samePrice(level(w.Order), lv) {
			r := evacct.OrderReplaced{BrokerOrderID: id, Quantity: ob.Quantity, At: o.env.At}
			if w.LimitPrice != nil {
				r.LimitPrice = lv
			} else {
				r.StopPrice = lv
			}
			o.add(r)
		}
	} else if w.Quantity.Cmp(ob.Quantity) != 0 || !samePrice(w.LimitPrice, ob.LimitPrice) || !samePrice(w.StopPrice, ob.StopPrice) {
		o.add(evacct.OrderReplaced{BrokerOrderID: id, Quantity: ob.Quantity, LimitPrice: ob.LimitPrice, StopPrice: ob.StopPrice, At: o.env.At})
	}
}

func samePrice(a, b *events.Decimal) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Cmp(*b) == 0
}

// fillPrice is the price of the fill of delta: the provider's last fill
// price when it gave one, else what the order's average says of it.
func fillPrice(w *Working, ob providercmd.Order, delta events.Decimal) events.Decimal {
	if ob.LastPrice != nil && ob.LastPrice.Sign() > 0 {
		return *ob.LastPrice
	}
	if ob.AvgPrice == nil {
		if w.LimitPrice != nil {
			return *w.LimitPrice
		}
		return events.Int(0)
	}
	if w.Filled.IsZero() {
		return *ob.AvgPrice
	}
	return ob.AvgPrice.Mul(ob.Filled).Sub(w.AvgPrice.Mul(w.Filled)).Quo(delta)
}

// net is position p after a fill of qty at price on side, and the PnL the
// fill realized, on the net model: adding averages the entry, reducing
// keeps it, crossing zero starts again at price.
func net(p evacct.Position, instrument, side string, qty, price events.Decimal) (evacct.Position, events.Decimal) {
	sq := signed(side, qty)
	if p.Multiplier.IsZero() {
		p.Multiplier = events.Int(1)
	}
	if p.Quantity.IsZero() {
		return evacct.Position{Instrument: instrument, Quantity: sq, AvgPrice: price, Multiplier: p.Multiplier}, events.Int(0)
	}
	nq := p.Quantity.Add(sq)
	if p.Quantity.Sign() == sq.Sign() {
		avg := p.AvgPrice.Mul(p.Quantity.Abs()).Add(price.Mul(qty)).Quo(nq.Abs())
		return evacct.Position{Instrument: instrument, Quantity: nq, AvgPrice: avg, Multiplier: p.Multiplier}, events.Int(0)
	}
	closed := qty.Min(p.Quantity.Abs())
	realized := price.Sub(p.AvgPrice).Mul(closed)
	if p.Quantity.Sign() < 0 {
		realized = realized.Neg()
	}
	realized = realized.Mul(p.Multiplier)
	switch {
	case nq.IsZero():
		return evacct.Position{Instrument: instrument, Quantity: nq, Multiplier: p.Multiplier}, realized
	case nq.Sign() == p.Quantity.Sign():
		return evacct.Position{Instrument: instrument, Quantity: nq, AvgPrice: p.AvgPrice, Multiplier: p.Multiplier}, realized
	}
	return evacct.Position{Instrument: instrument, Quantity: nq, AvgPrice: price, Multiplier: p.Multiplier}, realized
}
