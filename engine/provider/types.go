package provider

import (
	"time"

	"github.com/svc/engine/events"
)

// Side is an order's side.
type Side string

// Sides.
const (
	Buy  Side = "buy"
	Sell Side = "sell"
)

// OrderType is an order's type: the engine's four, and the take-profit
// trigger an exit plan places natively.
type OrderType string

// Order types. Stop is a stop-market order; TakeProfit is a take-profit
// market order (a trigger at StopPrice in the position's favour), used by
// exit plans with ReduceOnly or ClosePosition. TakeProfitLimit and Other
// only describe orders placed elsewhere (a snapshot adopts them); the
// engine never sends them.
const (
	Market          OrderType = "market"
	Limit           OrderType = "limit"
	Stop            OrderType = "stop"
	StopLimit       OrderType = "stop_limit"
	TakeProfit      OrderType = "take_profit"
	TakeProfitLimit OrderType = "take_profit_limit"
	Other           OrderType = "other"
)

// TIF is an order's time in force, the engine's values plus post-only.
type TIF string

// Times in force. Day is the engine's default; a provider without a
// session day (a 24/7 exchange) does not list it in its capabilities.
const (
	Day      TIF = "day"
	GTC      TIF = "gtc"
	IOC      TIF = "ioc"
	FOK      TIF = "fok"
	PostOnly TIF = "post_only"
)

// Order is a new order as the engine sends it. ClientOrderID is the
// provider's id, derived with ClientOrderID before the intent is committed.
type Order struct {
	ClientOrderID string
	Instrument    string // the provider's symbol, such as BTCUSDT
	Side          Side
	Type          OrderType
	TIF           TIF             // empty for market and trigger-market orders
	Quantity      events.Decimal  // ignored when ClosePosition
	LimitPrice    *events.Decimal // limit and stop_limit
	StopPrice     *events.Decimal // stop, stop_limit and take_profit
	ReduceOnly    bool
	// ClosePosition makes a stop or take_profit close the whole position
	// when it triggers, whatever its size then (no Quantity).
	ClosePosition bool
	// MarkTrigger makes a stop or take_profit trigger on the mark price
	// rather than the last trade (Binance's workingType MARK_PRICE): a
	// wick of the last price alone never fires it. The engine sets it on
	// an exit plan's legs.
	MarkTrigger bool
}

// CheckPrices refuses with *Unsupported an order whose prices do not fit
// its type: a LimitPrice for limit and stop_limit alone, a StopPrice for
// stop, stop_limit and take_profit alone.
func (o Order) CheckPrices() error {
	needLimit := o.Type == Limit || o.Type == StopLimit
	needStop := o.Type == Stop || o.Type == StopLimit || o.Type == TakeProfit
	switch {
	case needLimit != (o.LimitPrice != nil):
		return &Unsupported{Field: "limitPrice", Value: string(o.Type)}
	case needStop != (o.StopPrice != nil):
		return &Unsupported{Field: "stopPrice", Value: string(o.Type)}
	}
	return nil
}

// Replace changes a working order. Quantity and LimitPrice are the new
// values, both required by providers that replace natively.
type Replace struct {
	Instrument    string
	ClientOrderID string
	Side          Side
	Quantity      events.Decimal
	LimitPrice    events.Decimal
}

// Status is an order's state at the provider.
type Status string

// Statuses. StatusWorking and StatusPartiallyFilled rest; the others are final.
const (
	StatusWorking         Status = "working"
	StatusPartiallyFilled Status = "partially_filled"
	StatusFilled          Status = "filled"
	StatusCanceled        Status = "canceled"
	StatusRejected        Status = "rejected"
	StatusExpired         Status = "expired"
)

// Final reports whether the order can no longer change.
func (s Status) Final() bool {
	return s == StatusFilled || s == StatusCanceled || s == StatusRejected || s == StatusExpired
}

// OrderState is an order as the provider reports it.
type OrderState struct {
	ClientOrderID   string
	ProviderOrderID string
	Instrument      string
	Side            Side
	Type            OrderType
	TIF             TIF
	Status          Status
	Quantity        events.Decimal
	FilledQuantity  events.Decimal
	AveragePrice    *events.Decimal // nil until something filled
	LimitPrice      *events.Decimal
	StopPrice       *events.Decimal
	ReduceOnly      bool
	ClosePosition   bool
	UpdatedAt       time.Time // the provider's time of the last change
	// ValuePerPoint is the instrument's currency per point of price per
	// contract as the provider's own contract spec gives it (a futures
	// contract's); zero when the provider gives none.
	ValuePerPoint events.Decimal
}

// Instrument is a tradable instrument and its filters.
type Instrument struct {
	Symbol      string // BTCUSDT
	Base, Quote string // BTC, USDT
	Margin      string // the margin asset
	Perpetual   bool
	Trading     bool           // the provider takes orders now
	TickSize    events.Decimal // prices are multiples of it
	LotStep     events.Decimal // quantities are multiples of it
	MinQuantity events.Decimal
	MaxQuantity events.Decimal // zero: no bound given
	MinNotional events.Decimal // price × quantity at least; zero: none
}

// Quote is a public price. Bid, Ask and Mark are nil when that stream has
// not spoken yet; Stale says the feed was cut before this quote.
type Quote struct {
	Symbol string
	Bid    *events.Decimal
	Ask    *events.Decimal
	Mark   *events.Decimal
	At     time.Time
	Stale  bool
}

// Settings are the account's modes at the provider.
type Settings struct {
	HedgeMode       bool // positions per side (dual side) rather than one net position
	MultiAssets     bool // several assets margin together
	PortfolioMargin bool // the account is under portfolio margin
}

// Supported returns nil when the engine can trade the account in these
// modes (net positions, single-asset margin, no portfolio margin), else a
// *ModeUnsupported naming the first setting it cannot.
func (s Settings) Supported() error {
	switch {
	case s.HedgeMode:
		return &ModeUnsupported{Setting: SettingHedgeMode, Reported: "hedge", Supported: "one_way"}
	case s.MultiAssets:
		return &ModeUnsupported{Setting: SettingMultiAssets, Reported: "multi_assets", Supported: "single_asset"}
	case s.PortfolioMargin:
		return &ModeUnsupported{Setting: SettingPortfolioMargin, Reported: ReportedPortfolioMargin, Supported: "standard"}
	}
	return nil
}

// Balance is one asset of the account.
type Balance struct {
	Asset      string
	Wallet     events.Decimal // deposited and realized
	Available  events.Decimal // free for new orders
	Unrealized events.Decimal
	// AsOf is the provider's time of the transaction the balance last
	// changed with (Binance's transaction time, Tradovate's cashBalance
	// timestamp); zero when the provider gave none. An execution dated at
	// or before it is in Wallet already.
	AsOf time.Time
}

// Position is the account's net position in one instrument; Quantity is
// signed (negative: short) and never zero in a snapshot.
type Position struct {
	Instrument string
	Quantity   events.Decimal
	EntryPrice events.Decimal
	MarkPrice  events.Decimal
	Unrealized events.Decimal
	// ValuePerPoint is as OrderState's: zero when the provider gives none.
	ValuePerPoint events.Decimal
}

// Snapshot is the account's complete state at one reading: every balance
// the provider reports, every open position and every working order.
type Snapshot struct {
	At        time.Time
	Settings  Settings
	Balances  []Balance
	Positions []Position
	Orders    []OrderState
}

// Cursor is a provider's opaque position in an execution history.
type Cursor string

// Execution is one fill.
type Execution struct {
	ID              string // the provider's trade id, unique per instrument
	ClientOrderID   string // empty when the provider did not say
	ProviderOrderID string
	Instrument      string
	Side            Side
	Quantity        events.Decimal
	Price           events.Decimal
	Fee             events.Decimal
	FeeAsset        string
	RealizedPnL     events.Decimal
	Maker           bool
	At              time.Time
}

// Event is one thing the account's stream reports: *OrderUpdate,
// *AccountUpdate, *ConfigUpdate or *Gap.
type Event interface{ event() }

// OrderUpdate is a change of one order; Execution is set when it filled.
type OrderUpdate struct {
	Order     OrderState
	Execution *Execution
	At        time.Time
}

// AccountUpdate carries the balances and positions that changed.
// Positions may hold a zero Quantity: that position closed.
type AccountUpdate struct {
	Reason    string // the provider's reason, such as ORDER or FUNDING_FEE
	Balances  []Balance
	Positions []Position
	At        time.Time
}

// ConfigUpdate is a change of the account's settings; a nil field did not
// change.
type ConfigUpdate struct {
	HedgeMode   *bool
	MultiAssets *bool
	At          time.Time
}

// Gap says the stream was cut and is live again: events may have been
// missed between Since and At. The caller reconciles.
type Gap struct {
	Since time.Time // when the stream was last known live
	At    time.Time // when it was live again
	Cause string    // a short fixed word: "disconnected", "expired"
}

func (*OrderUpdate) event()   {}
func (*AccountUpdate) event() {}
func (*ConfigUpdate) event()  {}
func (*Gap) event()           {}
