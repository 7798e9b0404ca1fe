// Package account holds the events of a trading account's aggregate.
// Events carry the state they produce (position and balance after a fill), so
// every fold of them, the aggregate's and each projection's, is a plain copy.
package account

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file account.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Subject is the log subject of the account with the given id.
func Subject(accountID string) string { return events.Subject(events.KindAccount, accountID) }

// Order is an order as placed; the fields a client sent plus the ids given to it.
type Order struct {
	BrokerOrderID string          `json:"brokerOrderId"`
	ClientOrderID string          `json:"clientOrderId"`
	Instrument    string          `json:"instrument"`
	Side          string          `json:"side"`
	OrderType     string          `json:"orderType"`
	Quantity      events.Decimal  `json:"quantity"`
	LimitPrice    *events.Decimal `json:"limitPrice,omitempty"`
	StopPrice     *events.Decimal `json:"stopPrice,omitempty"`
	TimeInForce   string          `json:"timeInForce"`
	ReduceOnly    bool            `json:"reduceOnly,omitempty"`
	BracketID     string          `json:"bracketId,omitempty"`     // the bracket it enters or exits
	TermsRevision uint64          `json:"termsRevision,omitempty"` // the venue revision whose terms admitted it
	CreatedAt     time.Time       `json:"createdAt"`
	// LeaderOrderID is, on a copier follower's mirror of a leader's order,
	// the leader's order id (engine/copier).
	LeaderOrderID string `json:"leaderOrderId,omitempty"`
}

// Position is the net position in one instrument. Quantity is signed: short below zero.
type Position struct {
	Instrument string         `json:"instrument"`
	Quantity   events.Decimal `json:"quantity"`
	AvgPrice   events.Decimal `json:"avgPrice"`
	Multiplier events.Decimal `json:"multiplier"`
}

// Opened records a new account.
type Opened struct {
	AccountID       string         `json:"accountId"`
	TenantID        string         `json:"tenantId"`
	Broker          string         `json:"broker"`
	AccountNumber   string         `json:"accountNumber"`
	Label           string         `json:"label"`
	Currency        string         `json:"currency"`
	StartingBalance events.Decimal `json:"startingBalance"`
	Kind            string         `json:"kind"` // demo or evaluation
	Email           string         `json:"email,omitempty"`
	ReferenceID     string         `json:"referenceId,omitempty"`
	VenueID         string         `json:"venueId,omitempty"`      // issued by a venue into one of its groups
	GroupID         string         `json:"groupId,omitempty"`      //
	StageVersion    string         `json:"stageVersion,omitempty"` // the group's stage version recorded at issue
	AppID           string         `json:"appId,omitempty"`        // a Connect app's white-label paper, opened for Trader
	Trader          string         `json:"trader,omitempty"`       // the app's own id of its trader
	At              time.Time      `json:"at"`
}

// OrderPlaced records an accepted order; it rests until filled or canceled.
type OrderPlaced struct {
	Order Order `json:"order"`
}

// OrderFilled records a fill at Price, with the position and balance it left.
type OrderFilled struct {
	BrokerOrderID string          `json:"brokerOrderId"`
	FillID        string          `json:"fillId"`
	Instrument    string          `json:"instrument"`
	Side          string          `json:"side"`
	Quantity      events.Decimal  `json:"quantity"`
	Price         events.Decimal  `json:"price"`
	Realized      events.Decimal  `json:"realized"`      // PnL this fill realized
	Position      Position        `json:"position"`      // after the fill; zero quantity: flat
	Balance       events.Decimal  `json:"balance"`       // after the fill
	OrderFilled   events.Decimal  `json:"orderFilled"`   // order's filled quantity after the fill
	OrderAvgPrice events.Decimal  `json:"orderAvgPrice"` // order's average fill price after the fill
	Done          bool            `json:"done"`          // order fully filled
	Quote         *events.Decimal `json:"quote,omitempty"`
	Commission    *events.Decimal `json:"commission,omitempty"` // charged by the venue's condition, in Balance already
	// ProviderAt is the provider's own time of the fill on a provider
	// account (zero when it gave none, and on the paper book): a balance
	// the provider reports as of this time or later holds it.
	ProviderAt time.Time `json:"providerAt,omitzero"`
	At         time.Time `json:"at"`
}

// OrderCanceled records an order's end without (further) fills.
type OrderCanceled struct {
	BrokerOrderID string    `json:"brokerOrderId"`
	Reason        string    `json:"reason"` // requested, ioc, fok, flatten, risk
	At            time.Time `json:"at"`
}

// OrderReplaced records new terms of a working order.
type OrderReplaced struct {
	BrokerOrderID string          `json:"brokerOrderId"`
	Quantity      events.Decimal  `json:"quantity"`
	LimitPrice    *events.Decimal `json:"limitPrice,omitempty"`
	StopPrice     *events.Decimal `json:"stopPrice,omitempty"`
	At            time.Time       `json:"at"`
}

// StopTriggered records a stop or stop-limit order's trigger; a stop-limit then rests as a limit.
type StopTriggered struct {
	BrokerOrderID string         `json:"brokerOrderId"`
	Price         events.Decimal `json:"price"`
	At            time.Time      `json:"at"`
}

// BalanceChanged records money moved outside trading (credit, debit, adjustment, reset).
type BalanceChanged struct {
	ReferenceID string         `json:"referenceId"`
	Op          string         `json:"op"`
	Amount      events.Decimal `json:"amount"`
	Balance     events.Decimal `json:"balance"` // after
	Currency    string         `json:"currency,omitempty"`
	Digest      string         `json:"digest,omitempty"` // of the request, for same-key-same-body checks
	At          time.Time      `json:"at"`
}

func (Opened) Type() string         { return "account.opened.v1" }
func (OrderPlaced) Type() string    { return "order.placed.v1" }
func (OrderFilled) Type() string    { return "order.filled.v1" }
func (OrderCanceled) Type() string  { return "order.canceled.v1" }
func (OrderReplaced) Type() string  { return "order.replaced.v1" }
func (StopTriggered) Type() string  { return "order.stop_triggered.v1" }
func (BalanceChanged) Type() string { return "account.balance_changed.v1" }

// Registry lists the account event types.
func Registry() events.Registry {
	return events.Merge(events.Registry{
		Opened{}.Type():         events.Of[Opened](),
		OrderPlaced{}.Type():    events.Of[OrderPlaced](),
		OrderFilled{}.Type():    events.Of[OrderFilled](),
		OrderCanceled{}.Type():  events.Of[OrderCanceled](),
		OrderReplaced{}.Type():  events.Of[OrderReplaced](),
		StopTriggered{}.Type():  events.Of[StopTriggered](),
		BalanceChanged{}.Type(): events.Of[BalanceChanged](),
	}, firmRegistry(), riskRegistry(), bracketRegistry(), providerRegistry())
}
