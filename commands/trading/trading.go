// Package trading holds the trading commands: place, cancel, replace, close,
// flatten, reverse, and the fills the paper book's reactor sends.
package trading

import (
	"net/http"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
)

// Quote is the touch an order was decided against; it travels in the command so Decide stays pure.
type Quote struct {
	Instrument string         `json:"instrument"`
	Bid        events.Decimal `json:"bid"`
	Ask        events.Decimal `json:"ask"`
	At         time.Time      `json:"at"`
}

// Spec is what the account's book permits for an instrument; nil: not permitted.
type Spec struct {
	Symbol      string
	Multiplier  events.Decimal
	MaxQuantity events.Decimal
}

// Market is the market context the engine attaches to a command before Decide.
type Market struct {
	Quotes map[string]Quote
	Specs  map[string]Spec
}

// Sides, order types and times in force.
var (
	Sides      = []string{"buy", "sell"}
	OrderTypes = []string{"market", "limit", "stop", "stop_limit"}
	TIFs       = []string{"day", "gtc", "ioc", "fok"}
)

func oneOf(v string, set []string) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}

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
	Market        Market          `json:"-"`
}

// Validate checks the order's shape.
func (c *PlaceOrder) Validate() error {
	if c.TimeInForce == "" {
		c.TimeInForce = "day"
	}
	switch {
	case len(c.ClientOrderID) == 0 || len(c.ClientOrderID) > 64:
		return commands.Invalid("clientOrderId is required, 1 to 64 characters")
	case c.Instrument == "":
		return commands.Invalid("instrument is required")
	case !oneOf(c.Side, Sides):
		return commands.Invalid("side must be buy or sell")
	case !oneOf(c.OrderType, OrderTypes):
		return commands.Invalid("orderType must be market, limit, stop or stop_limit")
	case !oneOf(c.TimeInForce, TIFs):
		return commands.Invalid("timeInForce must be day, gtc, ioc or fok")
	case c.Quantity.Sign() <= 0:
		return commands.Invalid("quantity must be greater than zero")
	}
	needLimit := c.OrderType == "limit" || c.OrderType == "stop_limit"
	needStop := c.OrderType == "stop" || c.OrderType == "stop_limit"
	switch {
	case needLimit && c.LimitPrice == nil:
		return commands.Invalid("limitPrice is required for a %s order", c.OrderType)
	case !needLimit && c.LimitPrice != nil:
		return commands.Invalid("limitPrice is not allowed on a %s order", c.OrderType)
	case needStop && c.StopPrice == nil:
		return commands.Invalid("stopPrice is required for a %s order", c.OrderType)
	case !needStop && c.StopPrice != nil:
		return commands.Invalid("stopPrice is not allowed on a %s order", c.OrderType)
	case c.LimitPrice != nil && c.LimitPrice.Sign() <= 0:
		return commands.Invalid("limitPrice must be greater than zero")
	case c.StopPrice != nil && c.StopPrice.Sign() <= 0:
		return commands.Invalid("stopPrice must be greater than zero")
	}
	return nil
}

// CancelOrder cancels a working order.
type CancelOrder struct {
	BrokerOrderID string `json:"brokerOrderId"`
}

// OrderID is the order the command names.
func (c *CancelOrder) OrderID() string { return c.BrokerOrderID }

// Validate checks the shape.
func (c *CancelOrder) Validate() error {
	if c.BrokerOrderID == "" {
		return commands.Invalid("brokerOrderId is required")
	}
	return nil
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
	switch {
	case c.BrokerOrderID == "":
		return commands.Invalid("brokerOrderId is required")
	case c.Quantity == nil && c.LimitPrice == nil && c.StopPrice == nil:
		return commands.Invalid("replace needs quantity, limitPrice or stopPrice")
	case c.Quantity != nil && c.Quantity.Sign() <= 0:
		return commands.Invalid("quantity must be greater than zero")
	case c.LimitPrice != nil && c.LimitPrice.Sign() <= 0:
		return commands.Invalid("limitPrice must be greater than zero")
	case c.StopPrice != nil && c.StopPrice.Sign() <= 0:
		return commands.Invalid("stopPrice must be greater than zero")
	}
	return nil
}

// ClosePosition closes all or part of a position at market, reduce-only.
type ClosePosition struct {
	Instrument string          `json:"instrument"`
	Quantity   *events.Decimal `json:"quantity"`
	Market     Market          `json:"-"`
}

// Validate checks the shape.
func (c *ClosePosition) Validate() error {
	switch {
	case c.Instrument == "":
		return commands.Invalid("instrument is required")
	case c.Quantity != nil && c.Quantity.Sign() <= 0:
		return commands.Invalid("quantity must be greater than zero")
	}
	return nil
}

// Flatten cancels every working order and closes every position.
type Flatten struct {
	Reason string `json:"-"`
	Market Market `json:"-"`
}

// Validate checks the shape.
func (c *Flatten) Validate() error { return nil }

// Reverse turns a position around: a market order for twice its size, the other way.
type Reverse struct {
	Instrument    string `json:"instrument"`
	ClientOrderID string `json:"clientOrderId"`
	Market        Market `json:"-"`
}

// Validate checks the shape.
func (c *Reverse) Validate() error {
	switch {
	case c.Instrument == "":
		return commands.Invalid("instrument is required")
	case len(c.ClientOrderID) == 0 || len(c.ClientOrderID) > 64:
		return commands.Invalid("clientOrderId is required, 1 to 64 characters")
	}
	return nil
}

// FillWorking is the paper book's reactor asking an account to fill or trigger
// its working orders on an instrument that the quote crosses.
type FillWorking struct {
	Quote Quote
}

// Validate checks the shape.
func (c *FillWorking) Validate() error { return nil }

// FeedRequiresConnection is the 503 a futures order meets without a futures source.
func FeedRequiresConnection(instrument string) *commands.Refusal {
	return commands.Refuse(http.StatusServiceUnavailable, "feed_requires_connection",
		"futures prices stream only from your own futures source; connect one to trade "+instrument,
		map[string]any{"instrument": instrument})
}

// ExpireDayOrders cancels the account's working `day` orders placed before the
// trading day of the command's time began.
type ExpireDayOrders struct{}

// Validate checks the shape.
func (c *ExpireDayOrders) Validate() error { return nil }
