package engine

import (
	"context"

	"github.com/svc/engine/commands"
	riskcmd "github.com/svc/engine/commands/risk"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/calendar"
	"github.com/svc/engine/engine/risk"
	"github.com/svc/engine/events"
)

// Risk is the risk reactor: its lock listener feeds the account stream's `lock` event.
func (e *Engine) Risk() *risk.Reactor { return e.risk }

// Calendar is the trading calendar the engine's accounts count risk periods in:
// futures (CME Globex) when the engine serves futures prices, crypto otherwise.
func (e *Engine) Calendar() string {
	if e.cfg.Futures != nil {
		return calendar.Futures
	}
	return calendar.Crypto
}

// mark is the newest mark (mid) of an instrument from its price source.
func (e *Engine) mark(instrument string) (events.Decimal, bool) {
	q, ok := e.market().Quotes[instrument]
	if !ok {
		return events.Decimal{}, false
	}
	return q.Bid.Add(q.Ask).Quo(events.Int(2)), true
}

// prepareRisk attaches what risk commands need: the marks of an evaluation and
// the calendar of a settings change.
func (e *Engine) prepareRisk(cmd commands.Command) {
	switch c := cmd.(type) {
	case *riskcmd.Evaluate:
		c.Market = e.market()
	case *riskcmd.SetSettings:
		c.Calendar = e.Calendar()
	}
}

// riskExec runs a command of the risk reactor on an account.
func (e *Engine) riskExec(ctx context.Context, accountID string, cmd commands.Command) error {
	if !e.owns(accountID) {
		return nil // every node watches every account's marks; its owner acts
	}
	_, err := e.Account(ctx, accountID, e.Envelope(events.Principal{System: "risk"}, "", cmd))
	return err
}

// guard makes sure a control that the newest marks breach has fired before an
// order is decided: the order then meets the lock. A failure to evaluate fails
// closed (503 holds_unreadable).
func (e *Engine) guard(ctx context.Context, accountID string, cmd commands.Command) error {
	switch cmd.(type) {
	case *trading.PlaceOrder, *trading.Reverse, *trading.ReplaceOrder:
	default:
		return nil
	}
	if !e.risk.Due(accountID) {
		return nil
	}
	err := e.riskExec(ctx, accountID, &riskcmd.Evaluate{})
	if err != nil {
		return risk.FailClosed(err)
	}
	return nil
}
