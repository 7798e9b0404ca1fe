package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/seal"
	evacct "github.com/svc/engine/events/account"
)

// A provider account's commands go out to the provider as intents: each is
// committed before anything is sent, and the reactor sends it with the
// account's credential, opened from its sealed copy. An account whose
// sealed credential this engine cannot open (the KEK its data key is
// wrapped under is missing from ENGINE_SEAL_KEYS, or its data key is gone)
// could send nothing, so its commands are refused before they are
// committed: 503 provider_unavailable, nothing recorded, nothing sent.
// Whether a credential opens is learnt once per sealed copy (the reactor's
// own opening teaches it, else the gate opens it once) and remembered: a
// copy that opened is not opened again for an order; one that could not is
// tried again after credRetry (the setting does not change while the
// engine runs, but another node may re-wrap the data key meanwhile).

// credRetry is how long a credential found unopenable stays so before the
// gate tries it again.
const credRetry = 30 * time.Second

// credChecks remembers, by account, whether its sealed credential opens here.
type credChecks struct {
	mu sync.Mutex
	m  map[string]credCheck
}

// credCheck is what was learnt of one sealed copy: err nil, it opens.
type credCheck struct {
	sum [sha256.Size]byte
	err error
	at  time.Time
}

// mayIntend reports whether cmd may commit an intent on a provider account
// (something to send to the provider).
func mayIntend(cmd commands.Command) bool {
	switch cmd.(type) {
	case *trading.PlaceOrder, *trading.Reverse, *trading.ClosePosition, *trading.Flatten, *trading.CancelOrder, *trading.ReplaceOrder,
		*trading.Protect, *trading.ChangeBracket, *trading.WithdrawBracket:
		return true
	}
	return false
}

// repeats reports whether cmd repeats a clientOrderId the account knows:
// the account answers it as it stood (its intent still open, or how it
// settled), sending nothing, so no gate of the credential stands before it.
func repeats(s *account.State, cmd commands.Command) bool {
	var coid string
	switch c := cmd.(type) {
	case *trading.PlaceOrder:
		coid = c.ClientOrderID
	case *trading.ClosePosition:
		coid = c.ClientOrderID
	case *trading.Reverse:
		coid = c.ClientOrderID
	case *trading.Flatten:
		coid = c.ClientOrderID
	}
	if coid == "" || s.Provider == nil {
		return false
	}
	if _, ok, err := s.OrderFor(coid); ok || err != nil {
		return true // used, or the log must answer first: the account decides
	}
	if _, ok := s.Provider.Placed[coid]; ok {
		return true
	}
	for _, in := range s.Provider.Intents {
		if in.Op == evacct.IntentPlace && in.Order.ClientOrderID == coid {
			return true
		}
	}
	return false
}

// definite reports whether err says the sealed copy will not open here
// (rather than that the vault could not be read just now).
func definite(err error) bool {
	return errors.Is(err, seal.ErrUnknownKEK) || errors.Is(err, seal.ErrDestroyed) || errors.Is(err, seal.ErrNotAuthentic) ||
		errors.Is(err, seal.ErrMalformed)
}

// noteOpen records what an opening of the account's sealed copy found:
// that it opened, or that it will not; a passing failure is not kept.
func (e *Engine) noteOpen(accountID string, sealed []byte, err error) {
	if err != nil && !definite(err) {
		return
	}
	c := &e.provAccts.creds
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]credCheck{}
	}
	old, had := c.m[accountID]
	sum := sha256.Sum256(sealed)
	c.m[accountID] = credCheck{sum: sum, err: err, at: e.cfg.Now()}
	if err != nil && (!had || old.sum != sum || old.err == nil) {
		slog.Error("providers: an account's sealed credential does not open on this engine; its commands are refused until it does",
			"account", accountID, "err", err)
	}
}

// known is what was learnt of the sealed copy, if it still holds.
func (e *Engine) known(accountID string, sealed []byte) (credCheck, bool) {
	c := &e.provAccts.creds
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.m[accountID]
	if !ok || k.sum != sha256.Sum256(sealed) || (k.err != nil && e.cfg.Now().Sub(k.at) >= credRetry) {
		return credCheck{}, false
	}
	return k, true
}

// credentialGate refuses a command on a provider account whose sealed
// credential this engine cannot open, before anything is committed: 503
// provider_unavailable. A command that repeats a clientOrderId the account
// knows passes: the account answers it by itself.
func (e *Engine) credentialGate(ctx context.Context, f liveFacts) error {
	if e.cfg.Providers == nil || e.cfg.Providers.Vault == nil || len(f.sealed) == 0 || f.settled {
		return nil
	}
	k, ok := e.known(f.accountID, f.sealed)
	err := k.err
	if !ok {
		err = e.openSealed(ctx, f.accountID, f.sealed)
		e.noteOpen(f.accountID, f.sealed, err)
	}
	switch {
	case err == nil:
		return nil
	case definite(err):
		return commands.Refuse(commands.CodeProviderUnavailable,
			"this engine cannot open the account's sealed credential (the key it was sealed under is not in the engine's key setting): "+
				"nothing was recorded or sent to the provider; the operator restores the key",
			map[string]any{"provider": f.provider})
	}
	return commands.Refuse(commands.CodeProviderUnavailable,
		"the account's sealed credential could not be read just now: nothing was recorded or sent to the provider; try again",
		map[string]any{"provider": f.provider})
}

// openSealed opens the account's sealed copy and wipes what it held.
func (e *Engine) openSealed(ctx context.Context, accountID string, sealed []byte) error {
	sl, err := seal.Parse(sealed)
	if err != nil {
		return err
	}
	sec, err := e.cfg.Providers.Vault.OpenSecret(ctx, accountID, sl)
	sec.Wipe()
	return err
}
