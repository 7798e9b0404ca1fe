package account

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file firm.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Balance operations recorded by BalanceChanged.Op.
const (
	OpCredit     = "credit"
	OpDebit      = "debit"
	OpAdjustment = "adjustment"
	OpReset      = "reset"
)

// AccountReset records an account returned to its starting state. In its
// commit the ledger entry (a BalanceChanged with op reset) comes first, then an
// OrderCanceled per working order, then this event, which names the positions
// it removed so every fold of it is a plain copy.
type AccountReset struct {
	ReferenceID string         `json:"referenceId"`
	Balance     events.Decimal `json:"balance"` // the starting balance the account holds again
	Cleared     []string       `json:"cleared"` // instruments whose positions were removed
	At          time.Time      `json:"at"`
}

// FirmHalted records the firm's halt: new orders that may add exposure are refused
// until the firm resumes; open positions stay open.
type FirmHalted struct {
	At time.Time `json:"at"`
}

// FirmResumed records that the firm cleared its own halt.
type FirmResumed struct {
	At time.Time `json:"at"`
}

// ReconciliationHeld records an operator's reconciliation hold: no money moves
// and no exposure is added until it is released.
type ReconciliationHeld struct {
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
}

// ReconciliationReleased records the release of a reconciliation hold.
type ReconciliationReleased struct {
	By string    `json:"by,omitempty"`
	At time.Time `json:"at"`
}

func (AccountReset) Type() string           { return "account.reset.v1" }
func (FirmHalted) Type() string             { return "account.firm_halted.v1" }
func (FirmResumed) Type() string            { return "account.firm_resumed.v1" }
func (ReconciliationHeld) Type() string     { return "account.reconciliation_held.v1" }
func (ReconciliationReleased) Type() string { return "account.reconciliation_released.v1" }

// firmRegistry lists the back-office event types of the account.
func firmRegistry() events.Registry {
	return events.Registry{
		AccountReset{}.Type():           events.Of[AccountReset](),
		FirmHalted{}.Type():             events.Of[FirmHalted](),
		FirmResumed{}.Type():            events.Of[FirmResumed](),
		ReconciliationHeld{}.Type():     events.Of[ReconciliationHeld](),
		ReconciliationReleased{}.Type(): events.Of[ReconciliationReleased](),
	}
}
