package account

import (
	"slices"
	"time"

	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// The provider's balance is authoritative. A provider reports its balance
// and its fills on separate updates that may arrive in either order (a
// Binance ACCOUNT_UPDATE and ORDER_TRADE_UPDATE, a Tradovate cashBalance
// and fill), so the account's balance is the balance the provider last
// reported plus only the fills that report cannot hold yet: those the
// provider dates after the report's own time (BalanceObserved.AsOf, the
// transaction time; OrderFilled.ProviderAt, the trade time). A fill dated
// at or before the last report is in it already and moves no money again;
// a report older than the one the account holds changes nothing.

// Unreported is a fill the provider's last balance report cannot hold: its
// time at the provider and the money it moved (realized less fee).
type Unreported struct {
	At     time.Time
	Amount events.Decimal
}

// fillTime is the provider's time of the fill an order report tells of:
// its last fill's time, else the order's last change; zero: unknown.
func fillTime(ob providercmd.Order) time.Time {
	if !ob.LastAt.IsZero() {
		return ob.LastAt
	}
	return ob.At
}

// reportedAt is the provider's time of the account currency's last
// balance report; zero when none gave one.
func reportedAt(s *State) time.Time {
	if s.Provider == nil {
		return time.Time{}
	}
	return s.Provider.Balances[s.Currency].AsOf
}

// inReport reports whether the provider's last balance report holds a
// fill it dates at: both times known and the fill's not after the report's.
func inReport(s *State, at time.Time) bool {
	asOf := reportedAt(s)
	return !at.IsZero() && !asOf.IsZero() && !at.After(asOf)
}

// fillBalance is the balance after a fill that moved money, dated at by
// the provider: unchanged when the last report holds it already.
func fillBalance(s *State, at time.Time, money events.Decimal) events.Decimal {
	if inReport(s, at) {
		return s.Balance
	}
	return s.Balance.Add(money)
}

// applyFillMoney keeps a provider fill the last report cannot hold (Apply's
// OrderFilled, through applyProviderFill).
func applyFillMoney(s *State, e evacct.OrderFilled) {
	if e.ProviderAt.IsZero() || inReport(s, e.ProviderAt) {
		return
	}
	money := e.Realized
	if e.Commission != nil {
		money = money.Sub(*e.Commission)
	}
	s.Provider.Unreported = append(slices.Clip(s.Provider.Unreported), Unreported{At: e.ProviderAt, Amount: money})
}

// reportBalance is the account's balance after a report of its currency:
// the report plus the fills it cannot hold, and those fills; a report
// without a time of its own holds every fill recorded before it.
func reportBalance(s *State, e evacct.BalanceObserved) (events.Decimal, []Unreported) {
	bal := e.Wallet
	if e.AsOf.IsZero() {
		return bal, nil
	}
	var left []Unreported
	for _, u := range s.Provider.Unreported {
		if u.At.After(e.AsOf) {
			left = append(left, u)
			bal = bal.Add(u.Amount)
		}
	}
	return bal, left
}

// applyBalance folds a balance report (Apply's BalanceObserved).
func applyBalance(s *State, e evacct.BalanceObserved) {
	if e.Asset != s.Currency {
		return
	}
	if s.Provider == nil {
		s.Balance = e.Wallet
		return
	}
	s.Balance, s.Provider.Unreported = reportBalance(s, e)
}

// balanceNews reports whether a balance report tells the account anything:
// not older than the report it holds, and a new figure, a new time, or a
// balance of its own that differs.
func balanceNews(s *State, b evacct.BalanceObserved) bool {
	cur, ok := s.Provider.Balances[b.Asset]
	if !ok {
		return true
	}
	if !b.AsOf.IsZero() && b.AsOf.Before(cur.AsOf) {
		return false // stale: a later report is in already
	}
	if cur.Wallet.Cmp(b.Wallet) != 0 || cur.Available.Cmp(b.Available) != 0 || !cur.AsOf.Equal(b.AsOf) {
		return true
	}
	if b.Asset != s.Currency {
		return false
	}
	bal, left := reportBalance(s, b)
	return s.Balance.Cmp(bal) != 0 || len(left) != len(s.Provider.Unreported)
}
