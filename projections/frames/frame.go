// Package frames builds the account frame: one complete picture of an account
// at one revision, the payload of the stream's `account` event and of the snapshot.
package frames

import (
	"context"
	"slices"
	"strings"

	"github.com/svc/engine/events"
	evplan "github.com/svc/engine/events/plan"
	"github.com/svc/engine/projections"
)

// Marks gives the newest mark price of an instrument.
type Marks interface {
	Mark(instrument string) (events.Decimal, bool)
}

// Capabilities says what the account's book supports.
type Capabilities struct {
	OrderTypes      []string `json:"orderTypes"`
	TIFs            []string `json:"tifs"`
	ReduceOnly      bool     `json:"reduceOnly"`
	ExitPlanSupport []string `json:"exitPlanSupport"`
}

// Summary is the account's money.
type Summary struct {
	Currency        string         `json:"currency"`
	StartingBalance events.Decimal `json:"startingBalance"`
	Balance         events.Decimal `json:"balance"`
	Equity          events.Decimal `json:"equity"`
	RealizedPnl     events.Decimal `json:"realizedPnl"`
	UnrealizedPnl   events.Decimal `json:"unrealizedPnl"`
	Commissions     events.Decimal `json:"commissions"` // paid on fills to the venue's condition
}

// Position is a position with its mark.
type Position struct {
	Instrument    string          `json:"instrument"`
	Side          string          `json:"side"` // long or short
	Quantity      events.Decimal  `json:"quantity"`
	AvgPrice      events.Decimal  `json:"avgPrice"`
	MarkPrice     *events.Decimal `json:"markPrice"`
	UnrealizedPnl events.Decimal  `json:"unrealizedPnl"`
}

// Frame is the account frame.
type Frame struct {
	AccountID     string              `json:"accountId"`
	Revision      uint64              `json:"revision"`
	Clock         string              `json:"clock"`
	PositionModel string              `json:"positionModel"`
	Capabilities  Capabilities        `json:"capabilities"`
	Summary       Summary             `json:"summary"`
	Positions     []Position          `json:"positions"`
	Orders        []projections.Order `json:"orders"`
	Brackets      []Bracket           `json:"brackets"`
	ManagedExits  []ManagedExit       `json:"managedExits"`
	// Follows names the mark stacks (projections.MarkKey) whose marks move
	// its brackets' stops: a Marked commit of one of them changes the frame
	// though the account recorded nothing.
	Follows []string `json:"-"`
}

// PaperCapabilities are the paper book's. Their lists are shared by every
// frame: read them, never write into them.
func PaperCapabilities() Capabilities { return paperCapabilities }

var paperCapabilities = Capabilities{
	OrderTypes:      []string{"market", "limit", "stop", "stop_limit"},
	TIFs:            []string{"day", "gtc", "ioc", "fok"},
	ReduceOnly:      true,
	ExitPlanSupport: []string{evplan.StopLoss, evplan.TakeProfit, evplan.MultipleTargets, evplan.RunnerLeg, evplan.CapBreakeven, evplan.TrailingStop},
}

// KindProvider is the Kind of an account that lives at a provider.
const KindProvider = "provider"

// ClockOf is the account's clock: observation for an account that lives at
// a provider (its revision stamps the engine's reading), engine otherwise.
func ClockOf(a projections.Account) string {
	if a.Kind == KindProvider {
		return "observation"
	}
	return "engine"
}

// ProviderCapabilities are a provider account's when its provider declares
// no more: the provider's order types and times in force (no session day),
// reduce-only, and no exit plan.
func ProviderCapabilities() Capabilities {
	return Capabilities{OrderTypes: []string{"market", "limit", "stop", "stop_limit"}, TIFs: []string{"gtc", "ioc", "fok"},
		ReduceOnly: true, ExitPlanSupport: []string{}}
}

// providerCapabilities are the capabilities of each provider's accounts, by
// the broker they are listed under, as the provider's own capability flags
// give them (engine/provider.Capabilities, through
// engine/provider.ExitPlanSupport for exitPlanSupport; the adapter's tests
// hold the two equal). Binance USDⓈ-M: the engine places a bracket's stop
// and targets as the exchange's reduce-only stop and take-profit orders and
// keeps their one-cancels-other itself; it moves no stop there, so neither
// breakeven nor a trailing stop. Tradovate's below.
func providerCapabilities(broker string) Capabilities {
	c := ProviderCapabilities()
	switch broker {
	case "binance":
		c.ExitPlanSupport = []string{evplan.StopLoss, evplan.TakeProfit, evplan.MultipleTargets, evplan.RunnerLeg}
	case "tradovate":
		// Tradovate (futures): a session day and good-till-canceled, no
		// native reduce-only flag (the adapter checks a reducing order
		// against the position before sending it), so no exit plan.
		c.TIFs, c.ReduceOnly = []string{"day", "gtc", "ioc", "fok"}, false
	}
	return c
}

// CapabilitiesOf is what the account's book supports.
func CapabilitiesOf(a projections.Account) Capabilities {
	if a.Kind == KindProvider {
		return providerCapabilities(a.Broker)
	}
	return PaperCapabilities()
}

// Unrealized is the PnL of position p at mark m.
func Unrealized(p projections.Position, m events.Decimal) events.Decimal {
	return m.Sub(p.AvgPrice).Mul(p.Quantity).Mul(p.Multiplier)
}

// Build reads the account's frame from the store, marking positions with
// marks; its brackets and stop orders show their derived stop levels. The
// frame is read in several parts (the account, its positions, its brackets,
// their mark stacks and its working orders), all under one snapshot of the
// store (projections.View): a commit folded between two of them would
// otherwise give a frame that names one revision and shows a later
// commit's orders (the fault harness saw a frame named 6870 list an order
// commit 6872 placed; issue 47).
func Build(ctx context.Context, s projections.Store, accountID string, marks Marks) (Frame, error) {
	f := new(Frame)
	if err := BuildInto(ctx, s, accountID, marks, f); err != nil {
		return Frame{}, err
	}
	return *f, nil
}

// BuildInto is Build into f, a frame the caller may reuse: the stream
// renders it through an interface without copying it again. f's Positions,
// emptied, are where the positions go (a reused frame keeps their room).
// On an error f is left as it is.
func BuildInto(ctx context.Context, s projections.Store, accountID string, marks Marks, f *Frame) error {
	return projections.View(ctx, s, func(s projections.Store) error {
		a, err := projections.GetInto[projections.Account](ctx, s, projections.CollAccount, accountID)
		if err != nil {
			return err
		}
		g, err := build(ctx, s, a, marks, f.Positions[:0])
		if err != nil {
			return err
		}
		*f = g
		return nil
	})
}

// build reads the rest of the frame of account a.
func build(ctx context.Context, s projections.Store, a projections.Account, marks Marks, positions []Position) (Frame, error) {
	if positions == nil {
		positions = []Position{} // [] in JSON, not null
	}
	accountID := a.AccountID
	ps, err := projections.ListInto[projections.Position](ctx, s, projections.CollPosition, projections.Query{Prefix: accountID + "/"})
	if err != nil {
		return Frame{}, err
	}
	st := projections.NewStops(s) // the brackets first: the stop orders' levels come from them
	bs, managed := []Bracket{}, []ManagedExit{}
	var follows []string
	if a.Brackets > 0 { // no read on the hot path of an account without brackets
		if bs, managed, follows, err = brackets(ctx, s, st, accountID); err != nil {
			return Frame{}, err
		}
	}
	orders, err := st.WorkingOrders(ctx, accountID)
	if err != nil {
		return Frame{}, err
	}
	f := Frame{AccountID: a.AccountID, Revision: st.Revision(a.Revision), Clock: ClockOf(a), PositionModel: "net",
		Capabilities: CapabilitiesOf(a), Positions: positions, Orders: orders, Brackets: bs, ManagedExits: managed,
		Follows: follows}
	unreal := events.Int(0)
	for _, p := range ps {
		fp := Position{Instrument: p.Instrument, Side: "long", Quantity: p.Quantity.Abs(), AvgPrice: p.AvgPrice, UnrealizedPnl: events.Int(0)}
		if p.Quantity.Sign() < 0 {
			fp.Side = "short"
		}
		if m, ok := marks.Mark(p.Instrument); ok {
			fp.MarkPrice = &m
			fp.UnrealizedPnl = Unrealized(p, m)
			unreal = unreal.Add(fp.UnrealizedPnl)
		}
		f.Positions = append(f.Positions, fp)
	}
	slices.SortFunc(f.Positions, func(p, q Position) int { return strings.Compare(p.Instrument, q.Instrument) })
	f.Summary = Summary{Currency: a.Currency, StartingBalance: a.StartingBalance, Balance: a.Balance,
		Equity: a.Balance.Add(unreal), RealizedPnl: a.Realized, UnrealizedPnl: unreal, Commissions: a.Commissions}
	return f, nil
}
