// Package risk holds the risk commands: replace the controls, unlock, and the
// evaluations and releases the engine's risk reactor sends. Amounts and
// times the decisions need travel in the command, so Decide stays pure.
package risk

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// Limits of the settings values.
var (
	// MaxAmount bounds a loss limit or profit target: the largest balance an
	// account may hold.
	MaxAmount = commands.MaxBalance
	// MaxAmountDecimals bounds the decimals of a loss limit or profit target.
	MaxAmountDecimals = 8
	// MaxEODMinutes bounds eodCloseValue, minutes before the session close.
	MaxEODMinutes = events.Int(720)
)

// Number is a settings value: a JSON number or null, never a string.
type Number = commands.Number

// decimals counts v's digits after the point, trailing zeros left out.
func decimals(v events.Decimal) int {
	if v.Decimals() > 64 {
		return v.Decimals() // as written: far past every limit, never rendered
	}
	s := v.String()
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

// SetSettings replaces the account's five controls in one write (PUT /api/risk).
// Broker, AccountNumber and UpdatedAt may be sent back as read: Broker and
// AccountNumber must then name the account; UpdatedAt is ignored.
type SetSettings struct {
	Broker                        *string         `json:"broker"`
	AccountNumber                 *string         `json:"accountNumber"`
	DailyLossEnabled              *bool           `json:"dailyLossEnabled"`
	DailyLossValue                *Number         `json:"dailyLossValue"`
	WeeklyLossEnabled             *bool           `json:"weeklyLossEnabled"`
	WeeklyLossValue               *Number         `json:"weeklyLossValue"`
	DailyProfitEnabled            *bool           `json:"dailyProfitEnabled"`
	DailyProfitValue              *Number         `json:"dailyProfitValue"`
	WeeklyProfitEnabled           *bool           `json:"weeklyProfitEnabled"`
	WeeklyProfitValue             *Number         `json:"weeklyProfitValue"`
	EODCloseEnabled               *bool           `json:"eodCloseEnabled"`
	EODCloseValue                 *Number         `json:"eodCloseValue"`
	LockSettingsWhenTradingLocked *bool           `json:"lockSettingsWhenTradingLocked"`
	UpdatedAt                     json.RawMessage `json:"updatedAt"`
	// Calendar is the trading calendar the engine counts the periods in.
	Calendar string `json:"-"`
}

func flag(b *bool) bool { return b != nil && *b }

// Settings is the replacement the command makes.
func (c *SetSettings) Settings() evacct.RiskSettings {
	return evacct.RiskSettings{
		DailyLossEnabled: flag(c.DailyLossEnabled), DailyLossValue: c.DailyLossValue.Ptr(),
		WeeklyLossEnabled: flag(c.WeeklyLossEnabled), WeeklyLossValue: c.WeeklyLossValue.Ptr(),
		DailyProfitEnabled: flag(c.DailyProfitEnabled), DailyProfitValue: c.DailyProfitValue.Ptr(),
		WeeklyProfitEnabled: flag(c.WeeklyProfitEnabled), WeeklyProfitValue: c.WeeklyProfitValue.Ptr(),
		EODCloseEnabled: flag(c.EODCloseEnabled), EODCloseValue: c.EODCloseValue.Ptr(),
		LockSettingsWhenTradingLocked: flag(c.LockSettingsWhenTradingLocked),
	}
}

// Validate checks the values: every value null or a number of zero or more in
// range (a loss limit or profit target at most MaxAmount with at most
// MaxAmountDecimals decimals; eodCloseValue whole minutes up to MaxEODMinutes);
// an enabled control needs a value above zero. Every refusal is a 400
// invalid_request with params.field naming the value.
func (c *SetSettings) Validate() error {
	for _, f := range []struct {
		name string
		v    *string
	}{{"broker", c.Broker}, {"accountNumber", c.AccountNumber}} {
		if f.v != nil {
			if err := commands.Text(f.name, *f.v, commands.MaxShortName); err != nil {
				return err
			}
		}
	}
	amount := func(name string, enabled *bool, n *Number) error {
		v := n.Ptr()
		switch {
		case v == nil && flag(enabled):
			return commands.BadField(name, nil, "%s is required while %s is enabled", name, name[:len(name)-len("Value")]+"Enabled")
		case v == nil:
			return nil
		case v.Sign() < 0:
			return commands.BadField(name, nil, "%s must not be negative", name)
		case v.Cmp(MaxAmount) > 0:
			return commands.BadField(name, map[string]any{"max": MaxAmount.String()}, "%s is above %s", name, MaxAmount)
		case decimals(*v) > MaxAmountDecimals:
			return commands.BadField(name, map[string]any{"decimals": MaxAmountDecimals}, "%s has more than %d decimals", name, MaxAmountDecimals)
		case v.IsZero() && flag(enabled):
			return commands.BadField(name, nil, "%s must be above zero while enabled", name)
		}
		return nil
	}
	for _, f := range []struct {
		name    string
		enabled *bool
		n       *Number
	}{
		{"dailyLossValue", c.DailyLossEnabled, c.DailyLossValue},
		{"weeklyLossValue", c.WeeklyLossEnabled, c.WeeklyLossValue},
		{"dailyProfitValue", c.DailyProfitEnabled, c.DailyProfitValue},
		{"weeklyProfitValue", c.WeeklyProfitEnabled, c.WeeklyProfitValue},
	} {
		if err := amount(f.name, f.enabled, f.n); err != nil {
			return err
		}
	}
	if v := c.EODCloseValue.Ptr(); v != nil || flag(c.EODCloseEnabled) {
		const f = "eodCloseValue"
		switch {
		case v == nil:
			return commands.BadField(f, nil, "eodCloseValue is required while eodCloseEnabled")
		case v.Sign() < 0:
			return commands.BadField(f, nil, "eodCloseValue must not be negative")
		case v.Cmp(MaxEODMinutes) > 0:
			return commands.BadField(f, map[string]any{"max": MaxEODMinutes.String()}, "eodCloseValue must be at most %s minutes", MaxEODMinutes)
		case decimals(*v) > 0:
			return commands.BadField(f, nil, "eodCloseValue must be a whole number of minutes before the session close")
		case v.IsZero() && flag(c.EODCloseEnabled):
			return commands.BadField(f, nil, "eodCloseValue must be at least 1 minute while enabled")
		}
	}
	if len(c.UpdatedAt) > 0 {
		var n json.Number
		if err := json.Unmarshal(c.UpdatedAt, &n); err != nil && string(bytes.TrimSpace(c.UpdatedAt)) != "null" {
			return commands.BadField("updatedAt", nil, "updatedAt must be a number")
		}
	}
	return nil
}

// Unlock is the trader's manual unlock (POST /api/risk/unlock).
type Unlock struct{}

// Validate checks the shape.
func (c *Unlock) Validate() error { return nil }

// Evaluate asks an account to check its controls against the marks of Market
// (the mid of each quote) at the envelope's time, and to fire the first one
// breached: lock, cancel working orders and close positions in one commit. A
// control that no longer breaches, or already fired this period, records nothing.
type Evaluate struct {
	Market trading.Market `json:"-"`
	// Gap is more marks, by instrument, the controls are checked at when the
	// newest do not breach one: the lowest and the highest mark of each
	// instrument a node saw while no node acted on the account (a takeover,
	// risk.Reactor.Take). A breach at them locks, its triggerPnl theirs; the
	// flatten takes Market.
	Gap []map[string]events.Decimal
}

// Validate checks the shape.
func (c *Evaluate) Validate() error { return nil }

// Release records the end of a fired control's lock whose unlock time has passed.
type Release struct{}

// Validate checks the shape.
func (c *Release) Validate() error { return nil }

// BreachEvaluation locks the account with eval_breach (the evaluation lifecycle sends it).
type BreachEvaluation struct{ Reason string }

// Validate checks the shape.
func (c *BreachEvaluation) Validate() error { return nil }

// ReleaseEvaluation lifts an eval_breach lock.
type ReleaseEvaluation struct{}

// Validate checks the shape.
func (c *ReleaseEvaluation) Validate() error { return nil }
