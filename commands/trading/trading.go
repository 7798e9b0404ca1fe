// Package trading holds the trading commands: place, cancel, replace, close,
// flatten, reverse, and the fills the paper book's reactor sends.
package trading

import (
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events"
	"github.com/svc/engine/events/mark"
)

// Quote is the touch an order was decided against; it travels in the command so Decide stays pure.
type Quote struct {
	Instrument string         `json:"instrument"`
	Bid        events.Decimal `json:"bid"`
	Ask        events.Decimal `json:"ask"`
	At         time.Time      `json:"at"`
	// HighBid and LowAsk, when set, are the best touches since the quote the
	// paper book last decided an account's brackets on: breakeven and
	// trailing rules follow them, so a high between two wakes is not lost.
	// Fills always take Bid and Ask.
	HighBid *events.Decimal `json:"highBid,omitempty"`
	LowAsk  *events.Decimal `json:"lowAsk,omitempty"`
	// Path, when set, is every quote from the one HighBid and LowAsk start
	// at up to this one, oldest first (the paper book's reactor keeps the
	// newest few thousand): a bracket's stop that its rules moved up the
	// path and a later quote of it traded through triggers at the level of
	// that moment, though the rules' best touch came after. Never shared
	// with another decision's writes: read only.
	Path []Touch `json:"-"`
	// PathFrom is, by working stop, the index of Path from which it rests
	// where it is (absent: all of it): a quote before a stop was set where it
	// is never triggers it.
	PathFrom map[string]int `json:"-"`
	// PathBest is, by working stop resting where it is since before Path's
	// first quote, the best touch of its side among the quotes since then that
	// Path no longer holds (the reactor keeps a few thousand), where better
	// than any of Path's: its rules move it there before the walk.
	PathBest map[string]events.Decimal `json:"-"`
	// Marks is the paper book's marks of the instrument on the deciding
	// node (events/mark): a bracket's stop is where the marks after its
	// anchor move it, and a decision that records a bracket takes them in
	// (anchors it at Marks.N). Nil: no marks (a bracket keeps its anchor).
	Marks *mark.Stack `json:"-"`
}

// Touch is one quote's bid and ask.
type Touch struct{ Bid, Ask events.Decimal }

// Spec is what the account's book permits for an instrument; absent: not permitted.
// A limit or stop price must be a multiple of TickSize; a quantity a multiple
// of LotStep and at least MinQuantity. A zero TickSize, LotStep or MinQuantity
// checks nothing.
type Spec struct {
	Symbol      string
	Multiplier  events.Decimal
	MaxQuantity events.Decimal
	TickSize    events.Decimal
	LotStep     events.Decimal
	MinQuantity events.Decimal
}

// MaxInstrument bounds an instrument symbol as a command carries it.
const MaxInstrument = 64

// Market is the market context the engine attaches to a command before Decide.
type Market struct {
	Quotes map[string]Quote
	Specs  map[string]Spec
	// Terms of every venue group, by venueID + "/" + groupID: an immutable
	// snapshot the engine replaces on each venue commit.
	Terms map[string]*Terms
}

// Priced is a command that carries the market context (its Market field):
// the engine attaches it before Decide, and Decide reads it.
type Priced interface {
	MarketOf() *Market
}

// MarketOf implements Priced.
func (c *PlaceOrder) MarketOf() *Market { return &c.Market }

// MarketOf implements Priced.
func (c *ReplaceOrder) MarketOf() *Market { return &c.Market }

// MarketOf implements Priced.
func (c *ClosePosition) MarketOf() *Market { return &c.Market }

// MarketOf implements Priced.
func (c *Flatten) MarketOf() *Market { return &c.Market }

// MarketOf implements Priced.
func (c *Reverse) MarketOf() *Market { return &c.Market }

// MarketOf implements Priced.
func (c *Protect) MarketOf() *Market { return &c.Market }

// MarketOf implements Priced.
func (c *ChangeBracket) MarketOf() *Market { return &c.Market }

// PlaceOrder places one order on an account.
type PlaceOrder struct {
	ClientOrderID string          `json:"clientOrderId"`
	Instrument    string          `json:"instrument"`
	Side          string          `json:"side"`
	OrderType     string          `json:"orderType"`
	Quantity      events.Decimal  `json:"quantity"`
	LimitPrice    *events.Decimal `json:"limitPrice"`
	StopPrice     *events.Decimal `json:"stopPrice"`
	TimeInForce   string          `json:"timeInForce"`
	ReduceOnly    bool            `json:"reduceOnly"`
	ExitPlan      *ExitPlanRef    `json:"exitPlan"`
	Bracket       *BracketPlan    `json:"-"` // the exitPlan, verified and loaded by the gateway
	Market        Market          `json:"-"`
	LeaderOrderID string          `json:"-"` // a copier's mirror: the leader's order it mirrors (engine/copier)
}

// Validate checks the order's shape against the order vocabulary
// (domain/order): a known side, type and time in force (day when none), the
// prices the type needs and no other, a time in force and reduce-only the
// type allows, and an exitPlan only on a type that may be a bracket's entry.
func (c *PlaceOrder) Validate() error {
	if c.TimeInForce == "" {
		c.TimeInForce = string(order.DefaultTIF)
	}
	if err := commands.ClientOrderID("clientOrderId", c.ClientOrderID); err != nil {
		return err
	}
	if err := commands.Identifier("instrument", c.Instrument, MaxInstrument); err != nil {
		return err
	}
	_, sideOK := order.ParseSide(c.Side)
	typ, typeOK := order.ParseType(c.OrderType)
	tif, tifOK := order.ParseTIF(c.TimeInForce)
	switch {
	case !sideOK:
		return commands.InvalidField("side", nil, "side must be %s", order.OneOf(order.Names(order.Sides())))
	case !typeOK:
		return commands.InvalidField("orderType", nil, "orderType must be %s", order.OneOf(order.TypeNames()))
	case !tifOK:
		return commands.InvalidField("timeInForce", nil, "timeInForce must be %s", order.OneOf(order.Names(order.TIFs())))
	case c.Quantity.Sign() <= 0:
		return commands.InvalidField("quantity", nil, "quantity must be greater than zero")
	}
	sp := typ.Spec()
	switch {
	case sp.LimitPrice && c.LimitPrice == nil:
		return commands.InvalidField("limitPrice", nil, "limitPrice is required for a %s order", c.OrderType)
	case !sp.LimitPrice && c.LimitPrice != nil:
		return commands.InvalidField("limitPrice", nil, "limitPrice is not allowed on a %s order", c.OrderType)
	case sp.StopPrice && c.StopPrice == nil:
		return commands.InvalidField("stopPrice", nil, "stopPrice is required for a %s order", c.OrderType)
	case !sp.StopPrice && c.StopPrice != nil:
		return commands.InvalidField("stopPrice", nil, "stopPrice is not allowed on a %s order", c.OrderType)
	case !sp.Allows(tif):
		return commands.InvalidField("timeInForce", nil, "timeInForce on a %s order must be %s", c.OrderType, order.OneOf(order.Names(sp.TIFs)))
	case c.ReduceOnly && !sp.ReduceOnly:
		return commands.InvalidField("reduceOnly", nil, "a %s order cannot be reduce-only", c.OrderType)
	}
	if c.ExitPlan != nil {
		if !sp.Entry {
			return commands.InvalidField("orderType", nil, "the entry of an exit plan is %s order", entryTypes())
		}
		if c.ReduceOnly {
			return commands.InvalidField("reduceOnly", nil, "an order with an exitPlan opens or adds to a position: it cannot be reduce-only")
		}
		if err := c.ExitPlan.Validate(); err != nil {
			return err
		}
	}
	return positive(c.LimitPrice, c.StopPrice)
}

// entryTypes spells the order types that may be an exit plan's entry: "a market or a limit".
func entryTypes() string {
	var names []string
	for _, sp := range order.Types() {
		if sp.Entry {
			names = append(names, "a "+string(sp.Type))
		}
	}
	return order.OneOf(names)
}

// positive refuses a limit or stop price of zero or less.
func positive(limit, stop *events.Decimal) error {
	switch {
	case limit != nil && limit.Sign() <= 0:
		return commands.InvalidField("limitPrice", nil, "limitPrice must be greater than zero")
	case stop != nil && stop.Sign() <= 0:
		return commands.InvalidField("stopPrice", nil, "stopPrice must be greater than zero")
	}
	return nil
}

// MaxOrderID bounds a brokerOrderId as a client sends it back.
const MaxOrderID = 64

// CancelOrder cancels a working order.
type CancelOrder struct {
	BrokerOrderID string `json:"brokerOrderId"`
}

// OrderID is the order the command names.
func (c *CancelOrder) OrderID() string { return c.BrokerOrderID }

// Validate checks the shape.
func (c *CancelOrder) Validate() error {
	return commands.Key("brokerOrderId", c.BrokerOrderID, MaxOrderID)
}

// ReplaceOrder changes a working order's quantity or prices.
type ReplaceOrder struct {
	BrokerOrderID string          `json:"brokerOrderId"`
	Quantity      *events.Decimal `json:"quantity"`
	LimitPrice    *events.Decimal `json:"limitPrice"`
	StopPrice     *events.Decimal `json:"stopPrice"`
	Market        Market          `json:"-"`
}

// OrderID is the order the command names.
func (c *ReplaceOrder) OrderID() string { return c.BrokerOrderID }

// Validate checks the shape.
func (c *ReplaceOrder) Validate() error {
	if err := commands.Key("brokerOrderId", c.BrokerOrderID, MaxOrderID); err != nil {
		return err
	}
	switch {
	case c.Quantity == nil && c.LimitPrice == nil && c.StopPrice == nil:
		return commands.Invalid("replace needs quantity, limitPrice or stopPrice")
	case c.Quantity != nil && c.Quantity.Sign() <= 0:
		return commands.InvalidField("quantity", nil, "quantity must be greater than zero")
	}
	return positive(c.LimitPrice, c.StopPrice)
}

// ClosePosition closes all or part of a position at market, reduce-only.
// ClientOrderID, when set, is the closing order's clientOrderId and the
// command's idempotency key: used once on the account, forever (409 after).
// Empty: the order's clientOrderId is derived from the command id.
type ClosePosition struct {
	Instrument    string          `json:"instrument"`
	Quantity      *events.Decimal `json:"quantity"`
	ClientOrderID string          `json:"clientOrderId"`
	Market        Market          `json:"-"`
}

// Validate checks the shape.
func (c *ClosePosition) Validate() error {
	if err := commands.Identifier("instrument", c.Instrument, MaxInstrument); err != nil {
		return err
	}
	if c.ClientOrderID != "" {
		if err := commands.ClientOrderID("clientOrderId", c.ClientOrderID); err != nil {
			return err
		}
	}
	if c.Quantity != nil && c.Quantity.Sign() <= 0 {
		return commands.InvalidField("quantity", nil, "quantity must be greater than zero")
	}
	return nil
}

// Flatten cancels every working order and closes every position.
// ClientOrderID, when set, is the command's idempotency key, used once on the
// account, forever (409 after): the first closing order (in instrument order)
// carries it as its clientOrderId; the others, and all of them when it is
// empty, carry ids derived from the command id. A flatten that places no
// closing order records no key, so its repeat is another flatten.
type Flatten struct {
	ClientOrderID string `json:"clientOrderId"`
	Reason        string `json:"-"`
	Market        Market `json:"-"`
}

// Validate checks the shape.
func (c *Flatten) Validate() error {
	if c.ClientOrderID == "" {
		return nil
	}
	return commands.ClientOrderID("clientOrderId", c.ClientOrderID)
}

// Reverse turns a position around: a market order for twice its size, the other way.
type Reverse struct {
	Instrument    string `json:"instrument"`
	ClientOrderID string `json:"clientOrderId"`
	Market        Market `json:"-"`
}

// Validate checks the shape.
func (c *Reverse) Validate() error {
	if err := commands.Identifier("instrument", c.Instrument, MaxInstrument); err != nil {
		return err
	}
	return commands.ClientOrderID("clientOrderId", c.ClientOrderID)
}

// FillWorking is the paper book's reactor asking an account to fill or trigger
// its working orders on an instrument that the quote crosses.
type FillWorking struct {
	Quote Quote
	Terms map[string]*Terms // the engine's venue terms, for the commissions fills pay
	// TradedThrough names working stops (stop and stop-limit orders not yet
	// triggered) that a quote since they began resting traded through, though
	// this quote may no longer: each triggers at its stop price, as it would
	// have at that quote, and then fills against this quote.
	TradedThrough []string
	// Touched names resting limits (and stop-limits triggered before this
	// decision) that a quote since they began resting touched (a buy's limit
	// at or above the ask, a sell's at or below the bid), though this quote
	// may no longer: each fills at its limit price, as it would have at that
	// quote.
	Touched []string
}

// Validate checks the shape.
func (c *FillWorking) Validate() error { return nil }

// Rebase is the paper book anchoring an account's breakeven and trailing
// brackets on Instrument in this node's marks (Marks) without a quote: a
// bracket anchored in another node's marks (Foreign, by node: the account
// moved to this node) first moves where those put it; one recorded before
// marks existed is anchored where it is.
type Rebase struct {
	Instrument string
	Foreign    map[string]*mark.Stack
	Marks      *mark.Stack
}

// Validate checks the shape.
func (c *Rebase) Validate() error { return nil }

// FeedRequiresConnection is the 503 a futures order meets without a futures source.
func FeedRequiresConnection(instrument string) *commands.Refusal {
	return commands.Refuse(commands.CodeFeedRequiresConnection,
		FuturesNotServed+" ("+instrument+")", map[string]any{"instrument": instrument})
}

// FuturesNotServed says why a futures product is not tradable here and what
// makes it so: futures prices are licensed per trader.
const FuturesNotServed = "futures prices stream only from your own futures source: a login on the venue's production futures system, " +
	"under your own market data subscription, linked through Connect; none is connected, so futures are listed but not tradable"

// ExpireDayOrders cancels the account's working `day` orders placed before the
// trading day of the command's time began.
type ExpireDayOrders struct{}

// Validate checks the shape.
func (c *ExpireDayOrders) Validate() error { return nil }
