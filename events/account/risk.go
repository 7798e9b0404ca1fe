package account

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file risk.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Risk controls, as the lock reason and hold name of the lock each one fires.
const (
	ControlDailyLoss    = "daily_loss_limit"
	ControlWeeklyLoss   = "weekly_loss_limit"
	ControlDailyProfit  = "daily_profit_target"
	ControlWeeklyProfit = "weekly_profit_target"
	ControlEODClose     = "eod_close"
	// A venue's published risk policy: its loss limits fire like the
	// controls above, under lock reasons of their own.
	ControlPolicyDailyLoss  = "policy_daily_loss_limit"
	ControlPolicyWeeklyLoss = "policy_weekly_loss_limit"
	// ReasonEvalBreach is the lock of a breached evaluation; a manual unlock cannot clear it.
	ReasonEvalBreach = "eval_breach"
)

// RiskSettings are the account's five risk controls. A value is nil when unset;
// a loss limit or profit target is an amount of the account's currency and
// EODCloseValue is minutes before the trading day's session close.
type RiskSettings struct {
	DailyLossEnabled              bool            `json:"dailyLossEnabled"`
	DailyLossValue                *events.Decimal `json:"dailyLossValue"`
	WeeklyLossEnabled             bool            `json:"weeklyLossEnabled"`
	WeeklyLossValue               *events.Decimal `json:"weeklyLossValue"`
	DailyProfitEnabled            bool            `json:"dailyProfitEnabled"`
	DailyProfitValue              *events.Decimal `json:"dailyProfitValue"`
	WeeklyProfitEnabled           bool            `json:"weeklyProfitEnabled"`
	WeeklyProfitValue             *events.Decimal `json:"weeklyProfitValue"`
	EODCloseEnabled               bool            `json:"eodCloseEnabled"`
	EODCloseValue                 *events.Decimal `json:"eodCloseValue"`
	LockSettingsWhenTradingLocked bool            `json:"lockSettingsWhenTradingLocked"`
}

// RiskSettingsChanged records a replacement of all five controls, live at once.
// Calendar names the trading calendar its periods count in (crypto or futures).
type RiskSettingsChanged struct {
	Settings RiskSettings `json:"settings"`
	Calendar string       `json:"calendar"`
	At       time.Time    `json:"at"`
}

// RiskPolicyBound records the published risk policy an issued account lives
// under from this commit: its id, version and loss limits (nil: none).
type RiskPolicyBound struct {
	PolicyID        string          `json:"policyId"`
	Version         string          `json:"version"`
	DailyLossLimit  *events.Decimal `json:"dailyLossLimit,omitempty"`
	WeeklyLossLimit *events.Decimal `json:"weeklyLossLimit,omitempty"`
	At              time.Time       `json:"at"`
}

func (RiskPolicyBound) Type() string { return "account.risk_policy_bound.v1" }

// RiskLocked records a fired control: trading is locked until TradingUnlockAt
// (the next period's start). In its commit the working orders' cancels and the
// positions' closing fills follow it. The control latches for PeriodStart.
type RiskLocked struct {
	Control          string          `json:"control"`
	PeriodStart      time.Time       `json:"periodStart"`
	TriggerPnl       *events.Decimal `json:"triggerPnl,omitempty"`
	TradingUnlockAt  time.Time       `json:"tradingUnlockAt"`
	SettingsLocked   bool            `json:"settingsLocked"`
	SettingsUnlockAt *time.Time      `json:"settingsUnlockAt,omitempty"`
	FlattenConfirmed bool            `json:"flattenConfirmed"` // the commit left no position and no working order
	At               time.Time       `json:"at"`
}

// RiskUnlocked records the end of a fired control's lock: Reason manual (the
// trader's unlock: latches cleared, controls count again from At) or expired
// (its unlock time passed).
type RiskUnlocked struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// EvaluationBreached records an evaluation's breach: trading locked with
// eval_breach until the evaluation lifecycle releases it.
type EvaluationBreached struct {
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// EvaluationReleased records the release of an eval_breach lock.
type EvaluationReleased struct {
	At time.Time `json:"at"`
}

func (RiskSettingsChanged) Type() string { return "risk.settings_changed.v1" }
func (RiskLocked) Type() string          { return "risk.locked.v1" }
func (RiskUnlocked) Type() string        { return "risk.unlocked.v1" }
func (EvaluationBreached) Type() string  { return "risk.evaluation_breached.v1" }
func (EvaluationReleased) Type() string  { return "risk.evaluation_released.v1" }

func riskRegistry() events.Registry {
	return events.Registry{
		RiskSettingsChanged{}.Type(): events.Of[RiskSettingsChanged](),
		RiskLocked{}.Type():          events.Of[RiskLocked](),
		RiskUnlocked{}.Type():        events.Of[RiskUnlocked](),
		EvaluationBreached{}.Type():  events.Of[EvaluationBreached](),
		EvaluationReleased{}.Type():  events.Of[EvaluationReleased](),
		RiskPolicyBound{}.Type():     events.Of[RiskPolicyBound](),
	}
}
