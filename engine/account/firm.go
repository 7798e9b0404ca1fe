package account

import (
	"time"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/engine/idem"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// Hold names the firm side adds to Holds.
const (
	HoldFirmHalt       = "firm_halt"
	HoldReconciliation = string(commands.CodeReconciliationHold)
)

// Firm is the account's back-office state: the firm's halt and an operator's
// reconciliation hold. The balance ledger's references live in State.References.
type Firm struct {
	Halted         bool
	HaltedAt       time.Time
	Reconciliation bool
	HeldAt         time.Time
}

// FirmHalted reports whether the firm's own halt is on the account.
func (s *State) FirmHalted() bool { return s.Firm.Halted }

// ReconciliationHeld reports whether an operator holds the account for reconciliation.
func (s *State) ReconciliationHeld() bool { return s.Firm.Reconciliation }

// applyFirm folds back-office events.
func applyFirm(s *State, e events.Event) {
	switch e := e.(type) {
	case evacct.AccountReset:
		s.Balance, s.Realized = e.Balance, events.Int(0)
		for _, inst := range e.Cleared {
			delete(s.Positions, inst)
		}
	case evacct.FirmHalted:
		s.Firm.Halted, s.Firm.HaltedAt = true, e.At
	case evacct.FirmResumed:
		s.Firm.Halted, s.Firm.HaltedAt = false, time.Time{}
	case evacct.ReconciliationHeld:
		s.Firm.Reconciliation, s.Firm.HeldAt = true, e.At
	case evacct.ReconciliationReleased:
		s.Firm.Reconciliation, s.Firm.HeldAt = false, time.Time{}
	}
}

// decideFirm decides back-office commands; ok is false for a command it does not know.
func decideFirm(s *State, env commands.Envelope) (evs []events.Event, ok bool, err error) {
	switch c := env.Cmd.(type) {
	case *firmcmd.BalanceOp:
		evs, err = decideBalance(s, env, c)
	case *firmcmd.ResetAccount:
		evs, err = decideReset(s, env, c)
	case *firmcmd.HaltAccount:
		evs, err = keyed(s, env, func() ([]events.Event, error) {
			switch {
			case s.Firm.Halted:
			case s.ControlLocked(env.At):
				return nil, commands.Refuse(commands.CodeLockNotOwned,
					"the account is locked by something the firm does not own (a fired risk control or an evaluation breach); nothing was replaced", nil)
			default:
				return []events.Event{evacct.FirmHalted{At: env.At}}, nil
			}
			return nil, nil
		}, true)
	case *firmcmd.ResumeAccount:
		evs, err = keyed(s, env, func() ([]events.Event, error) {
			if s.Firm.Halted {
				return []events.Event{evacct.FirmResumed{At: env.At}}, nil
			}
			return nil, nil
		}, false)
	case *firmcmd.HoldForReconciliation:
		if !s.Firm.Reconciliation {
			evs = []events.Event{evacct.ReconciliationHeld{Reason: c.Reason, By: c.By, At: env.At}}
		}
	case *firmcmd.ReleaseReconciliation:
		if s.Firm.Reconciliation {
			evs = []events.Event{evacct.ReconciliationReleased{By: c.By, At: env.At}}
		}
	default:
		return nil, false, nil
	}
	return evs, true, err
}

// keyed runs a halt or resume decision. Through the venue door (env carries
// an Idempotency-Key and its request's digest) it goes through idem.Write: the
// key and the answer {accountNumber, halted} are recorded in the commit, and
// a repeat answers it again. The partner route sends no digest: decided as
// it stands, nothing recorded.
func keyed(s *State, env commands.Envelope, decide func() ([]events.Event, error), halted bool) ([]events.Event, error) {
	if env.Key == "" || env.Digest == "" {
		return decide()
	}
	return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
		evs, err := decide()
		return evs, commands.Done, map[string]any{"accountNumber": s.AccountNumber, "halted": halted}, err
	})
}

// firmHolds names the holds the firm places on the account at time at.
func firmHolds(s *State, at time.Time) []string {
	var hs []string
	if s.Firm.Halted {
		hs = append(hs, HoldFirmHalt)
	}
	if s.Firm.Reconciliation {
		hs = append(hs, HoldReconciliation)
	}
	return hs
}

func reconciliationHold() error {
	return commands.Refuse(commands.CodeReconciliationHold,
		"the account is held for reconciliation: no money moves until an operator releases the hold", nil)
}

// reference answers a used referenceId: the same digest changes nothing (the
// original receipt stands), another digest is 409.
func reference(s *State, ref, digest string) (used bool, err error) {
	d, used := s.References[ref]
	if !used {
		return false, nil
	}
	if d != digest {
		return true, commands.Refuse(commands.CodeIdempotencyConflict,
			"referenceId was already used with a different request; the original operation stands",
			map[string]any{"referenceId": ref})
	}
	return true, nil
}

func balanceRefused(reason, msg string) error {
	return commands.Refuse(commands.CodeBalanceRefused, msg, map[string]any{"reason": reason})
}

// freeCollateral is the cash a debit may withdraw: the balance less any
// unrealized loss of open positions; false when a position has no mark.
func freeCollateral(s *State, marks map[string]events.Decimal) (events.Decimal, bool) {
	loss := events.Int(0)
	for inst, p := range s.Positions {
		m, ok := marks[inst]
		if !ok {
			return events.Decimal{}, false
		}
		u := m.Sub(p.AvgPrice).Mul(p.Quantity).Mul(p.Multiplier)
		if u.Sign() < 0 {
			loss = loss.Add(u)
		}
	}
	return s.Balance.Add(loss), true
}

func decideBalance(s *State, env commands.Envelope, c *firmcmd.BalanceOp) ([]events.Event, error) {
	digest := c.Digest(s.Currency)
	if used, err := reference(s, c.ReferenceID, digest); used || err != nil {
		return nil, err
	}
	if s.Firm.Reconciliation {
		return nil, reconciliationHold()
	}
	cur := c.Currency
	if cur == "" {
		cur = s.Currency
	}
	if !firmcmd.Issuable(cur, c.Env) {
		return nil, firmcmd.NotIssuable(cur, c.Env)
	}
	if cur != s.Currency {
		return nil, commands.MalformedRefusal(commands.CodeInvalidRequest,
			"currency is not the account's currency", map[string]any{"currency": cur})
	}
	if err := firmcmd.CheckPrecision(c.Amount, s.Currency, s.Kind); err != nil {
		return nil, err
	}
	delta := c.Amount
	if c.Op == firmcmd.OpDebit {
		delta = c.Amount.Neg()
	}
	if s.Balance.Add(delta).Abs().Cmp(commands.MaxBalance) > 0 {
		return nil, commands.InvalidField("amount", map[string]any{"maxBalance": commands.MaxBalance.String()},
			"the operation would leave a balance above the maximum of %s", commands.MaxBalance)
	}
	if delta.Sign() < 0 {
		if len(Holds(s, env.At)) > 0 {
			return nil, balanceRefused("permission_denied", "a hold is on the account: no money can be withdrawn")
		}
		free, ok := freeCollateral(s, c.Marks)
		if !ok {
			return nil, balanceRefused("invalid_request", "an open position cannot be valued now; retry when its price arrives")
		}
		if free.Add(delta).Sign() < 0 {
			return nil, balanceRefused("insufficient_funds", "the debit would withdraw more than the free collateral")
		}
	}
	return []events.Event{evacct.BalanceChanged{
		ReferenceID: c.ReferenceID, Op: c.Op, Amount: c.Amount, Balance: s.Balance.Add(delta),
		Currency: s.Currency, Digest: digest, At: env.At,
	}}, nil
}

func decideReset(s *State, env commands.Envelope, c *firmcmd.ResetAccount) ([]events.Event, error) {
	ref := c.ReferenceID
	if ref == "" {
		ref = "reset-" + env.ID.String()
	}
	digest := firmcmd.Digest("reset", s.AccountNumber)
	if used, err := reference(s, ref, digest); used || err != nil {
		return nil, err
	}
	if s.Firm.Reconciliation {
		return nil, reconciliationHold()
	}
	// Ledger first: the entry is the commit's first event, before anything else changes.
	out := []events.Event{evacct.BalanceChanged{
		ReferenceID: ref, Op: evacct.OpReset, Amount: s.StartingBalance.Sub(s.Balance), Balance: s.StartingBalance,
		Currency: s.Currency, Digest: digest, At: env.At,
	}}
	for _, id := range sortedKeys(s.Working) {
		out = append(out, evacct.OrderCanceled{BrokerOrderID: id, Reason: "reset", At: env.At})
	}
	out = append(out, evacct.AccountReset{ReferenceID: ref, Balance: s.StartingBalance, Cleared: sortedKeys(s.Positions), At: env.At})
	return out, nil
}
