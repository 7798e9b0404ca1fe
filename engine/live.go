package engine

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/connect"
	"github.com/svc/engine/engine/firm"
	"github.com/svc/engine/engine/tenant"
	"github.com/svc/engine/engine/venue"
	"github.com/svc/engine/events"
)

// The live trading switch: per user, it lets orders reach the user's
// accounts at providers. A user who never set it has the engine's default
// (ProvidersConfig.LiveTrading: off in production, on in the sandbox).
// While it is off the order and reverse routes refuse every order on a
// provider account, reducing ones included, with 403 feature_disabled;
// cancel, replace, close, flatten and exits stay available, so a trader
// can always leave what rests or stands at the provider. Paper accounts
// never read it.
//
// A venue can hold it off for its traders (engine/venue's holds), whatever
// their own switch says: the provider accounts linked through a Connect
// app of the venue's organization, and those of a trader whose
// pre-registration by the venue (its firm's) was linked, for that
// registration's provider. A hold of the whole venue holds them all; a
// trader's hold, named by the registration's email, holds that trader's.
// The refusal names who holds it (params.heldBy user or venue), never the
// venue's reason. A switch or a hold that cannot be read fails closed:
// 503 live_trading_unreadable.
//
// A provider account linked through a Connect app (hosted Connect) belongs
// to the app's tenant, which no user's switch speaks for: the trader's
// consent to live trading by the app, given on the link form and recorded
// on the account (engine/account's provider_consent.go), stands in for the
// switch there, the engine's default when the trader never said. Without
// it the app's orders are refused with params.heldBy trader: only the
// trader grants it, by linking the account again in hosted Connect with the
// box checked. A venue's hold comes first, as on every account.

// FeatureLiveTrading names the switch in feature_disabled's params.
const FeatureLiveTrading = "live_trading"

// Who holds live trading off, as feature_disabled's params.heldBy says.
const (
	HeldByUser  = "user"
	HeldByVenue = "venue"
	// HeldByTrader: the trader who linked the account through a Connect
	// app has not consented to live trading by the app.
	HeldByTrader = "trader"
)

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

// VenueHold is a venue's hold on live trading as it stands on one account.
type VenueHold struct {
	AccountID string
	VenueID   string
	VenueName string
	Scope     string    // venue (the whole venue's hold) or trader (the trader's own)
	Since     time.Time // when the hold began
}

// Scopes of a VenueHold.
const (
	HoldScopeVenue  = "venue"
	HoldScopeTrader = "trader"
)

// liveHolds are the holds of every venue that holds anything, by venue id:
// a copy taken after each of its commits (noteHolds), read without locks.
type liveHolds struct {
	mu sync.Mutex // serialises writers
	m  atomic.Pointer[map[string]*venue.Holds]
}

// noteHolds records the venue's holds after a commit (in its mailbox
// goroutine) or at a start.
func (e *Engine) noteHolds(venueID string, s *venue.State) {
	h := venue.HoldsOf(s)
	e.holds.mu.Lock()
	defer e.holds.mu.Unlock()
	cur := e.holds.m.Load()
	if cur == nil && h == nil {
		return
	}
	next := map[string]*venue.Holds{}
	if cur != nil {
		if _, had := (*cur)[venueID]; !had && h == nil {
			return
		}
		next = maps.Clone(*cur)
	}
	if h == nil {
		delete(next, venueID)
	} else {
		next[venueID] = h
	}
	e.holds.m.Store(&next)
}

// liveFacts are what the gate reads of a provider account.
type liveFacts struct {
	accountID, tenant, provider, appID string
	linked                             bool
	consent                            account.LiveConsent
	// sealed is the account's sealed credential while linked; settled: the
	// command repeats a clientOrderId the account answers by itself
	// (providercred.go).
	sealed  []byte
	settled bool
}

// liveFactsOf reads the facts of the account; cmd, when not nil, is the
// command the gate is asked about.
func (e *Engine) liveFactsOf(ctx context.Context, accountID string, cmd commands.Command) (liveFacts, error) {
	f := liveFacts{accountID: accountID}
	err := e.accounts.Inspect(ctx, accountID, func(s *account.State, _ uint64) {
		f.tenant, f.appID, f.linked = s.TenantID, s.AppID, s.Provider != nil
		if p := s.Provider; p != nil {
			f.provider, f.consent = p.Name, p.Consent
			if p.Linked {
				f.sealed = p.Sealed // replaced whole on each change, never written in place
			}
			f.settled = repeats(s, cmd)
		}
	})
	return f, err
}

// venueHold is the hold of a venue on the account, or nil. With holds
// standing anywhere it reads the account's Connect app and the firms of the
// venues that hold; an error is a hold it could not read.
func (e *Engine) venueHold(ctx context.Context, f liveFacts) (*VenueHold, error) {
	cur := e.holds.m.Load()
	if cur == nil || len(*cur) == 0 {
		return nil, nil
	}
	var appOrg string
	if f.appID != "" {
		if err := e.connect.apps.Inspect(ctx, f.appID, func(a *connect.App, _ uint64) { appOrg = a.Created.OrgID }); err != nil {
			return nil, err
		}
	}
	hs := *cur
	for _, id := range slices.Sorted(maps.Keys(hs)) {
		h := hs[id]
		held := func(scope string, since time.Time) *VenueHold {
			return &VenueHold{AccountID: f.accountID, VenueID: h.VenueID, VenueName: h.Name, Scope: scope, Since: since}
		}
		if h.All != nil && appOrg != "" && appOrg == h.OrgID {
			return held(HoldScopeVenue, h.All.Since), nil
		}
		emails, err := e.registeredAt(ctx, h.Firm, f)
		if err != nil {
			return nil, err
		}
		if len(emails) == 0 {
			continue
		}
		if h.All != nil {
			return held(HoldScopeVenue, h.All.Since), nil
		}
		for _, em := range emails {
			if t, ok := h.Traders[em]; ok {
				return held(HoldScopeTrader, t.Since), nil
			}
		}
	}
	return nil, nil
}

// registeredAt lists the emails (lower-cased, sorted) of the firm's
// pre-registrations the account's user linked for the account's provider.
func (e *Engine) registeredAt(ctx context.Context, firmID string, f liveFacts) ([]string, error) {
	var out []string
	if firmID == "" {
		return nil, nil // a venue without a firm registered no one
	}
	err := e.firms.Inspect(ctx, firmID, func(s *firm.State, _ uint64) {
		for _, r := range s.Registrations {
			if r.LinkedAt != nil && r.TraderID == f.tenant && strings.EqualFold(r.Provider, f.provider) {
				out = append(out, strings.ToLower(r.Email))
			}
		}
	})
	slices.Sort(out)
	return slices.Compact(out), err
}

// LiveHolds are the venues' holds on those of accounts that are linked
// provider accounts, in the order given; an account or a hold that cannot
// be read is 503 live_trading_unreadable.
func (e *Engine) LiveHolds(ctx context.Context, accountIDs []string) ([]VenueHold, error) {
	out := []VenueHold{}
	for _, id := range accountIDs {
		if !e.isProvider(id) {
			continue
		}
		f, err := e.liveFactsOf(ctx, id, nil)
		if err != nil {
			return nil, liveUnreadable()
		}
		if !f.linked {
			continue
		}
		h, err := e.venueHold(ctx, f)
		if err != nil {
			return nil, liveUnreadable()
		}
		if h != nil {
			out = append(out, *h)
		}
	}
	return out, nil
}

// liveGate refuses an order or a reverse on a provider account while a
// venue holds live trading off for it, or its user's switch (an app's
// account: its trader's consent) is off; a hold, a switch or a consent it
// cannot read fails closed. On any command that may send something to the
// provider it then refuses, before anything is committed, an account whose
// sealed credential this engine cannot open (providercred.go).
func (e *Engine) liveGate(ctx context.Context, accountID string, cmd commands.Command) error {
	if !e.isProvider(accountID) || !mayIntend(cmd) {
		return nil
	}
	f, err := e.liveFactsOf(ctx, accountID, cmd)
	if err != nil {
		return liveUnreadable()
	}
	if !f.linked {
		return nil // unlinked: the account refuses the order itself
	}
	switch cmd.(type) {
	case *trading.PlaceOrder, *trading.Reverse:
		if err := e.liveSwitch(ctx, f); err != nil {
			return err
		}
	}
	return e.credentialGate(ctx, f)
}

// liveSwitch refuses an order while a venue holds live trading off for the
// account or its switch (an app's account: its trader's consent) is off.
func (e *Engine) liveSwitch(ctx context.Context, f liveFacts) error {
	h, err := e.venueHold(ctx, f)
	if err != nil {
		return liveUnreadable()
	}
	if h != nil {
		return commands.Refuse(commands.CodeFeatureDisabled,
			"the venue "+h.VenueName+" holds live trading off for this account: nothing was sent to the provider; only the venue releases it",
			map[string]any{"feature": FeatureLiveTrading, "heldBy": HeldByVenue})
	}
	if f.appID != "" {
		if !f.consent.On(e.liveDefault()) {
			return commands.Refuse(commands.CodeFeatureDisabled,
				"the trader has not consented to live trading by this app on this account: nothing was sent to the provider; "+
					"only the trader grants it, by linking the account again in hosted Connect with live trading allowed",
				map[string]any{"feature": FeatureLiveTrading, "heldBy": HeldByTrader})
		}
		return nil
	}
	v, err := e.LiveTrading(ctx, f.tenant)
	if err != nil {
		return err
	}
	if !v.On {
		return commands.Refuse(commands.CodeFeatureDisabled,
			"live trading is off for this user: nothing was sent to the provider; switch it on (POST /api/account/live-trading with the password)",
			map[string]any{"feature": FeatureLiveTrading, "heldBy": HeldByUser})
	}
	return nil
}

// LiveConsentView is the trader's consent to live trading by the app on an
// account linked through a Connect app, as hosted Connect shows it.
type LiveConsentView struct {
	// On: the app's orders may reach the provider (the trader's word, else
	// the engine's default); Set: the trader said, at At.
	On, Set bool
	At      time.Time
}

// LiveConsent reads the trader's consent on an account linked through a
// Connect app; ok is false for any other account.
func (e *Engine) LiveConsent(ctx context.Context, accountID string) (v LiveConsentView, ok bool, err error) {
	if !e.isProvider(accountID) {
		return v, false, nil
	}
	f, err := e.liveFactsOf(ctx, accountID, nil)
	if err != nil || f.appID == "" || !f.linked {
		return v, false, err
	}
	return LiveConsentView{On: f.consent.On(e.liveDefault()), Set: f.consent.Set, At: f.consent.At}, true, nil
}

// WithdrawLiveConsent withdraws the trader's consent to live trading by the
// app on an account linked through it (cause: evacct.ConsentHosted or
// ConsentDisconnect); an account of another kind is left alone.
func (e *Engine) WithdrawLiveConsent(ctx context.Context, p events.Principal, accountID, cause string) (Result, error) {
	if !e.isProvider(accountID) {
		return Result{}, nil
	}
	f, err := e.liveFactsOf(ctx, accountID, nil)
	if err != nil || f.appID == "" || !f.linked {
		return Result{}, err
	}
	return e.Account(ctx, accountID, e.Envelope(p, "", &providercmd.WithdrawLiveConsent{Cause: cause}))
}

// VenueLive reads the venue's holds on live trading from its aggregate, as
// its read answers them (venue.LiveView; trader: only that trader's).
func (e *Engine) VenueLive(ctx context.Context, venueID, trader string) (map[string]any, error) {
	var v map[string]any
	err := e.venues.Inspect(ctx, venueID, func(s *venue.State, _ uint64) { v = venue.LiveView(venueID, s.Live, trader) })
	return v, err
}
