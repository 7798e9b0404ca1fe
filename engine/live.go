package engine

import (
	"context"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/tenant"
)

// The live trading switch: per user, it lets orders reach the user's
// accounts at providers. A user who never set it has the engine's default
// (ProvidersConfig.LiveTrading: off in production, on in the sandbox).
// While it is off the order and reverse routes refuse every order on a
// provider account, reducing ones included, with 403 feature_disabled;
// cancel, replace, close, flatten and exits stay available, so a trader
// can always leave what rests or stands at the provider. Paper accounts
// never read it.

// FeatureLiveTrading names the switch in feature_disabled's params.
const FeatureLiveTrading = "live_trading"

// LiveTradingView is a user's live trading switch as its read answers it.
type LiveTradingView struct {
	On bool
	// Set: the user set it (at At); otherwise On is the engine's default.
	Set bool
	At  time.Time
}

func (e *Engine) liveDefault() bool {
	return e.cfg.Providers != nil && e.cfg.Providers.LiveTrading
}

// LiveTrading reads the user's switch from the user's live state; a state
// that cannot be read is 503 live_trading_unreadable.
func (e *Engine) LiveTrading(ctx context.Context, userID string) (LiveTradingView, error) {
	var v LiveTradingView
	byDefault := e.liveDefault()
	err := e.tenants.Inspect(ctx, userID, func(s *tenant.State, _ uint64) {
		v = LiveTradingView{On: s.LiveTrading(byDefault), Set: s.Live.Set, At: s.Live.At}
	})
	if err != nil {
		return LiveTradingView{}, liveUnreadable()
	}
	return v, nil
}

func liveUnreadable() error {
	return commands.Refuse(commands.CodeLiveTradingUnreadable, "the live trading switch could not be read; nothing was sent: retry", nil)
}

// liveGate refuses an order or a reverse on a provider account while its
// user's live trading switch is off; a switch it cannot read fails closed.
func (e *Engine) liveGate(ctx context.Context, accountID string, cmd commands.Command) error {
	switch cmd.(type) {
	case *trading.PlaceOrder, *trading.Reverse:
	default:
		return nil
	}
	if !e.isProvider(accountID) {
		return nil
	}
	var userID string
	var linked bool
	if err := e.accounts.Inspect(ctx, accountID, func(s *account.State, _ uint64) {
		userID, linked = s.TenantID, s.Provider != nil
	}); err != nil {
		return liveUnreadable()
	}
	if !linked {
		return nil // unlinked: the account refuses the order itself
	}
	v, err := e.LiveTrading(ctx, userID)
	if err != nil {
		return err
	}
	if !v.On {
		return commands.Refuse(commands.CodeFeatureDisabled,
			"live trading is off for this user: nothing was sent to the provider; switch it on (POST /api/account/live-trading with the password)",
			map[string]any{"feature": FeatureLiveTrading})
	}
	return nil
}
