package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/providers"
	"github.com/svc/engine/engine/seal"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// ProvidersConfig serves accounts that live at a provider.
type ProvidersConfig struct {
	// Providers by name; each is offered for linking.
	Providers map[string]provider.Provider
	// Brokers names each provider's accounts in /api/account/list (broker).
	Brokers map[string]string
	// Vault seals the credentials; each link's data key is destroyed on unlinking.
	Vault *seal.Vault
	// LiveTrading is the live trading switch of a user who never set it
	// (live.go): false in production, true in the sandbox.
	LiveTrading bool
	// ReconcileEvery is the period of each linked account's reconciliation
	// besides those at a start and after a stream gap; 60 s when zero.
	ReconcileEvery time.Duration
	// OutcomeWait bounds how long an order's answer waits for the
	// provider's outcome before it is outcome_unknown; 5 s when zero.
	OutcomeWait time.Duration
	// Logins are the providers signed in to with a login name and password
	// (loginlinks.go), by name; each is in Providers too, in its default
	// environment.
	Logins map[string]LoginProvider
}

// provAccounts are the ids of the provider accounts this engine has seen,
// and the logins of those linked through one (loginlinks.go).
type provAccounts struct {
	m      sync.Map
	logins loginIndex
	creds  credChecks // whether each account's sealed credential opens here (providercred.go)
}

func (e *Engine) initProviders() {
	pc := e.cfg.Providers
	if pc == nil {
		return
	}
	if pc.OutcomeWait <= 0 {
		pc.OutcomeWait = 5 * time.Second
	}
	e.prov = providers.New(providers.Config{
		Providers:      pc.Providers,
		Now:            e.cfg.Now,
		Open:           e.openCredential,
		Owns:           e.owns, // a deposed owner never sends
		ReconcileEvery: pc.ReconcileEvery,
		Logins:         e.loginsConfig(), // loginlinks.go
		Exec: func(ctx context.Context, accountID string, cmd commands.Command) error {
			e.withValuePerPoint(accountID, cmd) // providerfutures.go
			_, err := e.accounts.Execute(ctx, accountID, e.Envelope(events.Principal{System: "provider"}, "", cmd))
			return err
		},
	})
}

// afterAccountCommit is the account's hook after each commit applied:
// this node's own, or (observed) one another node made.
func (e *Engine) afterAccountCommit(observed bool) func(id string, s *account.State, c events.Committed) {
	return func(id string, s *account.State, c events.Committed) {
		e.react(id, s)
		e.risk.Track(id, s, c.Seq)
		e.afterAccount(id, s, c)
		e.trackProvider(id, s, c, false, observed)
		e.copyLeader(id, s, c) // copiers.go
	}
}

// trackProvider hands a provider account's commit to the reactor on its
// owner; c is the commit (zero after a start or a takeover), observed
// when another node made it: an intent it opened is that node's to send,
// and this one only looks it up (two nodes that both believe they own
// the account, a partition's owner and one cut from the cluster that has
// not yet heard it lost its lease, would otherwise both send it).
func (e *Engine) trackProvider(id string, s *account.State, c events.Committed, resumed, observed bool) {
	if s.Provider == nil {
		return
	}
	e.provAccts.m.Store(id, true)
	e.provAccts.logins.track(id, s)
	if e.prov == nil || !e.owns(id) {
		return
	}
	if resumed {
		e.prov.Resume(id, s)
	} else {
		e.keepPlacing(c) // orderindex.go
		if observed {
			e.prov.TrackObserved(id, s, c)
		} else {
			e.prov.TrackCommit(id, s, c)
		}
	}
}

func (e *Engine) isProvider(accountID string) bool {
	_, ok := e.provAccts.m.Load(accountID)
	return ok
}

// credential is what a sealed credential holds.
type credential struct {
	APIKey string `json:"k"`
	Secret []byte `json:"s"`
}

func (e *Engine) openCredential(ctx context.Context, accountID string, sealed []byte) (provider.Credentials, error) {
	if e.cfg.Providers == nil || e.cfg.Providers.Vault == nil {
		return provider.Credentials{}, errors.New("engine: no vault for provider credentials")
	}
	sl, err := seal.Parse(sealed)
	if err != nil {
		return provider.Credentials{}, err
	}
	sec, err := e.cfg.Providers.Vault.OpenSecret(ctx, accountID, sl)
	e.noteOpen(accountID, sealed, err) // providercred.go
	if err != nil {
		return provider.Credentials{}, err
	}
	defer sec.Wipe()
	var c credential
	if err := json.Unmarshal(sec.Reveal(), &c); err != nil {
		return provider.Credentials{}, errors.New("engine: the sealed credential does not read")
	}
	return provider.Credentials{APIKey: c.APIKey, Secret: c.Secret}, nil
}

// ProviderNames lists the providers this engine links, sorted.
func (e *Engine) ProviderNames() []string {
	if e.prov == nil {
		return nil
	}
	ns := e.prov.Names()
	slices.Sort(ns)
	return ns
}

// LinkRequest is a trader's request to link an account at a provider.
type LinkRequest struct {
	AccountID string // derived from the caller's idempotency key
	Provider  string
	APIKey    string
	Secret    seal.Secret
	Label     string
	TenantID  string
	Email     string
	AppID     string // hosted Connect: the app the trader links through
	Trader    string // hosted Connect: the app's own id of the trader
	// LiveConsent is, on hosted Connect, the trader's word on live trading
	// by the app (nil: not said; live.go).
	LiveConsent *bool
	Principal   events.Principal
}

// LinkProvider checks the key at the provider (Connect: a key it does not
// take, or one that can withdraw, is refused), reads the account whole,
// seals the credential under the link's own data key and opens the
// account with the snapshot as its first observations. Only the sealed
// bytes enter the log.
func (e *Engine) LinkProvider(ctx context.Context, req LinkRequest) (Result, error) {
	if e.prov == nil {
		return Result{}, commands.Refuse(commands.CodeProviderNotSupported, "this engine links no provider accounts",
			map[string]any{"provider": req.Provider, "providers": []string{}})
	}
	prov, ok := e.prov.Provider(req.Provider)
	if !ok {
		return Result{}, commands.Refuse(commands.CodeProviderNotSupported, "this engine links no provider of that name",
			map[string]any{"provider": req.Provider, "providers": e.ProviderNames()})
	}
	creds := provider.Credentials{APIKey: req.APIKey, Secret: req.Secret.Reveal()}
	sess, err := prov.Connect(ctx, creds)
	if err != nil {
		return Result{}, ProviderRefusal(err, req.Provider, "")
	}
	snap, err := sess.Snapshot(ctx)
	if err != nil {
		_ = sess.Close()
		if errors.Is(err, provider.ErrUnavailable) || errors.Is(err, provider.ErrRateLimited) || errors.Is(err, provider.ErrBanned) {
			return Result{}, ProviderRefusal(err, req.Provider, "")
		}
		return Result{}, commands.Refuse(commands.CodeProviderReadFailed, "reading the provider account failed partway; nothing was linked: try again",
			map[string]any{"provider": req.Provider})
	}
	plain, err := json.Marshal(credential{APIKey: req.APIKey, Secret: req.Secret.Reveal()})
	if err != nil {
		_ = sess.Close()
		return Result{}, err
	}
	sealed, err := e.cfg.Providers.Vault.Seal(ctx, req.AccountID, plain)
	clear(plain)
	if err != nil {
		_ = sess.Close()
		return Result{}, fmt.Errorf("seal the credential: %w", err)
	}
	b, err := sealed.MarshalBinary()
	if err != nil {
		_ = sess.Close()
		return Result{}, err
	}
	currency := "USDT"
	broker := e.cfg.Providers.Brokers[req.Provider]
	if broker == "" {
		broker = req.Provider
	}
	label := req.Label
	if label == "" {
		label = strings.ToUpper(broker[:1]) + broker[1:] + " " + req.AccountID[len(req.AccountID)-4:]
	}
	link := &providercmd.Link{Provider: req.Provider, Broker: broker, TenantID: req.TenantID, Email: req.Email, AppID: req.AppID, Trader: req.Trader,
		AccountNumber: strings.ToUpper(broker[:1]) + "F" + req.AccountID[len(req.AccountID)-12:], Label: label, Currency: currency,
		CredentialID: creds.ID(), Sealed: b, Snapshot: providers.SnapshotObservation(snap, "link"), LiveConsent: req.LiveConsent}
	env := e.Envelope(req.Principal, "", link)
	if !e.owns(req.AccountID) {
		// Another node owns the account: the link is committed there, and
		// only the sealed credential and the snapshot travel; the owner's
		// reactor opens a session of its own from the sealed copy. The
		// session opened here for the check ends.
		_ = sess.Close()
		return e.forward(ctx, req.AccountID, env)
	}
	e.prov.Hand(req.AccountID, sess)
	res, err := e.accounts.Execute(ctx, req.AccountID, env)
	if err != nil || !opened(res) {
		e.prov.Drop(req.AccountID) // a link that opened nothing (the same link again) keeps no second session
	}
	return res, err
}

// opened reports whether the link's commit opened the account (the same
// link again records at most the trader's word on live trading).
func opened(res Result) bool {
	for _, ev := range res.Events {
		if _, ok := ev.(evacct.ProviderLinked); ok {
			return true
		}
	}
	return false
}

// UnlinkProvider ends the link and destroys its data key: the sealed
// credential in the log can never be opened again.
func (e *Engine) UnlinkProvider(ctx context.Context, p events.Principal, accountID string) (Result, error) {
	res, err := e.Account(ctx, accountID, e.Envelope(p, "", &providercmd.Unlink{}))
	if err != nil {
		return res, err
	}
	if e.cfg.Providers != nil && e.cfg.Providers.Vault != nil {
		if err := e.cfg.Providers.Vault.Destroy(ctx, accountID); err != nil {
			slog.Error("providers: destroying an unlinked account's data key failed; it is destroyed when unlinking again", "account", accountID, "err", err)
			return res, err
		}
	}
	return res, nil
}

// ProviderRefusal is the refusal of a provider's error before or instead
// of an outcome; it holds no provider text.
func ProviderRefusal(err error, providerName, instrument string) error {
	params := map[string]any{"provider": providerName}
	var kr *provider.KeyRefused
	var mu *provider.ModeUnsupported
	switch {
	case errors.As(err, &kr):
		params["reason"] = kr.Reason
		return commands.Refuse(commands.CodeProviderKeyRefused, "the provider key is refused: "+kr.Reason+
			" (link a key that cannot withdraw and may trade futures)", params)
	case errors.Is(err, provider.ErrUnauthorized):
		return commands.Refuse(commands.CodeProviderCredentialsRefused, "the provider did not take the API key and secret", params)
	case errors.As(err, &mu):
		return account.ModeRefusal(providerName, instrument, mu)
	case errors.Is(err, provider.ErrRateLimited), errors.Is(err, provider.ErrBanned):
		return commands.Refuse(commands.CodeProviderRateLimited, "the provider's rate limit for this key holds; nothing was sent", params)
	case errors.Is(err, provider.ErrRejected):
		return commands.Refuse(commands.CodeOrderRejected, "the provider rejected the request", params)
	}
	return commands.Refuse(commands.CodeProviderUnavailable, "the provider could not be reached; nothing was done", params)
}

// providerDefaults gives a provider account's order its defaults before
// validation: no time in force is gtc (a 24/7 exchange has no session day).
func (e *Engine) providerDefaults(accountID string, cmd commands.Command) {
	if c, ok := cmd.(*trading.PlaceOrder); ok && c.TimeInForce == "" && e.isProvider(accountID) {
		c.TimeInForce = "gtc"
	}
}

// awaitIntent waits, after a commit that recorded an intent, for its
// outcome at the provider, up to OutcomeWait, and answers it: the order as
// the provider took it (the intent's events with the settled revision, so
// the answer reads the order from the read model at that revision), the
// provider's rejection, or outcome_unknown (no Retry-After: the order may
// rest there). A retry of a clientOrderId whose intent is still open waits
// for it once more; one the account accepted before is 409
// idempotency_conflict naming the order (params.brokerOrderId), as on paper:
// the earlier order stands and repeating keeps answering 409.
func (e *Engine) awaitIntent(ctx context.Context, accountID string, env commands.Envelope, res mailbox.Result, err error) (mailbox.Result, error) {
	if e.prov == nil || !e.isProvider(accountID) {
		return res, err
	}
	var r *commands.Refusal
	if err != nil {
		if errors.As(err, &r) && r.Code == commands.CodeOutcomeUnknown {
			if in, ok := e.openIntentOf(ctx, accountID, env.Cmd); ok { // still open: wait once more for it
				return e.awaitOne(ctx, accountID, in, mailbox.Result{Events: []events.Event{in}}, true)
			}
		}
		return res, err
	}
	var first error // a flatten records several intents: each is awaited, the first refusal answered
	intents := 0
	for _, ev := range res.Events {
		if _, ok := ev.(evacct.OrderIntended); ok {
			intents++
		}
	}
	oneOrder := false // a command answered with its one order, made from the decisions
	switch c := env.Cmd.(type) {
	case *trading.PlaceOrder:
		oneOrder = intents == 1 && c.ExitPlan == nil // an exit plan's answer reads its bracket from the events
	case *trading.ClosePosition, *trading.Reverse, *trading.CancelOrder, *trading.ReplaceOrder:
		oneOrder = intents == 1
	}
	for _, ev := range res.Events {
		if in, ok := ev.(evacct.OrderIntended); ok {
			r, err := e.awaitOne(ctx, accountID, in, res, oneOrder)
			if err != nil {
				first = cmp.Or(first, err)
				continue
			}
			res = r
		}
	}
	if first != nil {
		return mailbox.Result{}, first
	}
	return res, nil
}

// openIntentOf finds the open place intent of a repeated order command.
func (e *Engine) openIntentOf(ctx context.Context, accountID string, cmd commands.Command) (evacct.OrderIntended, bool) {
	var coid string
	switch c := cmd.(type) {
	case *trading.PlaceOrder:
		coid = c.ClientOrderID
	case *trading.ClosePosition:
		coid = c.ClientOrderID
	case *trading.Reverse:
		coid = c.ClientOrderID
	}
	var out evacct.OrderIntended
	var found bool
	_ = e.accounts.Inspect(ctx, accountID, func(s *account.State, _ uint64) {
		for _, in := range s.OpenIntents() {
			if in.Op == evacct.IntentPlace && coid != "" && in.Order.ClientOrderID == coid {
				out, found = in, true
			}
		}
	})
	return out, found
}

// intentView is what an order's answer reads of its intent's outcome from
// the account's state (awaitOne).
type intentView struct {
	settled evacct.IntentSettled
	known   bool
	ended   bool // the order placed has ended (filled, canceled, expired): nothing the provider answers can move it
	open    bool
	rev     uint64
	name    string
}

// answerGrace bounds how long an order answer waits for the provider's
// answer to its request once the stream told of the order first.
const answerGrace = time.Second

// awaitOne waits for one intent's outcome; withCommit adds the events of
// the commits since the intent to the answer's (a command answered with
// its one order, made from the decisions; a flatten's answer, even of one
// order, and a bracket's read the read models, and would count an order
// twice).
func (e *Engine) awaitOne(ctx context.Context, accountID string, in evacct.OrderIntended, res mailbox.Result, withCommit bool) (mailbox.Result, error) {
	key := providercmd.IntentKey(in.Op, in.ProviderClientOrderID)
	// see reads the intent's outcome from the account's state at v, on the
	// account's goroutine: through Inspect (read), or as the commit that
	// settles the intent is applied (Wait's look, into woke: read here only
	// once Wait has returned on that wake).
	see := func(s *account.State, v uint64) (o intentView) {
		o.open, o.rev = true, v
		if s.Provider == nil {
			o.open = false
			return o
		}
		o.name = s.Provider.Name
		_, o.open = s.Provider.Intents[key]
		switch {
		case in.Op == evacct.IntentPlace:
			o.settled, o.known = s.Provider.Placed[in.Order.ClientOrderID] // rejected
			id, placed, _ := s.OrderFor(in.Order.ClientOrderID)
			if !o.known && placed && !o.open {
				o.settled, o.known = evacct.IntentSettled{Outcome: evacct.OutcomeAccepted}, true
			}
			_, working := s.Working[id]
			o.ended = placed && !working
		case in.Op == evacct.IntentReplace && !o.open:
			o.settled, o.known = s.Provider.Replaced[in.ProviderClientOrderID]
		default:
			o.settled, o.known = evacct.IntentSettled{Outcome: evacct.OutcomeAccepted}, !o.open
		}
		return o
	}
	var cur, woke intentView
	read := func() bool {
		_ = e.accounts.Inspect(ctx, accountID, func(s *account.State, v uint64) { cur = see(s, v) })
		return cur.open
	}
	settledHere, shown := e.prov.Wait(ctx, accountID, key, read, e.cfg.Providers.OutcomeWait,
		func(s *account.State, v uint64) { woke = see(s, v) })
	if !settledHere {
		return mailbox.Result{}, account.OutcomeUnknown()
	}
	if shown {
		cur = woke
	} else {
		read() // settled before Wait, or otherwise than by a commit here: read it as it stands
	}
	if answered := e.prov.Sending(accountID, key); answered != nil && !cur.ended {
		// The stream told of the order before the provider answered the
		// request: wait a moment for that answer's record, which carries
		// what the provider did at once (a market order's fill), unless
		// the stream tells of the order's end (its fill) first.
		t := time.NewTimer(answerGrace)
		for waiting := true; waiting; {
			changed := e.prov.Changed(accountID)
			if read(); cur.ended {
				break
			}
			select {
			case <-answered:
				waiting = false
			case <-changed:
			case <-t.C:
				waiting = false
			case <-ctx.Done():
				waiting = false
			}
		}
		t.Stop()
		read()
	}
	settled, known, rev, name := cur.settled, cur.known, cur.rev, cur.name
	intentSeq := res.Seq
	if withCommit && rev > res.Seq {
		// The answer is made from the decisions since the intent, as this
		// node applied them (the order as the read models will show it at
		// rev), and the caller's next read waits for them; where this node
		// does not hold them all, the answer reads the read models at rev.
		if evs, ok := e.prov.Since(accountID, res.Seq, rev); ok {
			res.Events = append(slices.Clip(res.Events), evs...)
		}
	}
	res.Seq = max(res.Seq, rev)
	switch {
	case known && settled.Outcome == evacct.OutcomeAccepted:
		return res, nil
	case known && settled.Outcome == evacct.OutcomeRejected:
		return mailbox.Result{}, account.OrderRejected(name)
	case in.Op == evacct.IntentCancel:
		return res, nil // the cancel was not carried out: the answer shows the order as it stands
	}
	params := map[string]any{"provider": name}
	if wait, ok := e.throttled(accountID, in, intentSeq, rev); ok {
		msg := "the provider's rate limit for this account holds; the order was not sent: send it again with the same clientOrderId after Retry-After seconds"
		if in.Op == evacct.IntentReplace {
			msg = "the provider's rate limit for this account holds; the change was not sent and the order rests unchanged: send the replace again after Retry-After seconds"
		}
		return mailbox.Result{}, &commands.Refusal{Code: commands.CodeProviderRateLimited, RetryAfter: wait, Params: params, Msg: msg}
	}
	if in.Op == evacct.IntentReplace {
		return mailbox.Result{}, commands.Refuse(commands.CodeProviderUnavailable,
			"the change did not reach the provider; the order rests unchanged: send the replace again", params)
	}
	return mailbox.Result{}, commands.Refuse(commands.CodeProviderUnavailable,
		"the order did not reach the provider; nothing was placed: send it again with the same clientOrderId", params)
}

// throttled finds, among the commits after the intent's (seq) up to rev,
// the intent's settlement as not sent because the provider's rate limit
// held, and the seconds it held for. Where this node does not hold those
// commits it finds nothing, and the answer says only that the request
// did not reach the provider.
func (e *Engine) throttled(accountID string, in evacct.OrderIntended, seq, rev uint64) (int, bool) {
	if rev <= seq {
		return 0, false
	}
	evs, ok := e.prov.Since(accountID, seq, rev)
	if !ok {
		return 0, false
	}
	for _, ev := range evs {
		if s, ok := ev.(evacct.IntentSettled); ok && s.ProviderClientOrderID == in.ProviderClientOrderID &&
			s.Outcome == evacct.OutcomeNotSent && s.Reason == evacct.ReasonThrottled {
			return s.RetryAfter, true
		}
	}
	return 0, false
}

// Secret is a provider secret as the gateway hands it over: it never prints.
type Secret = seal.Secret

// NewSecret copies b into a Secret.
func NewSecret(b []byte) Secret { return seal.NewSecret(b) }

// IsProviderAccount reports whether the account lives at a provider.
func (e *Engine) IsProviderAccount(accountID string) bool { return e.isProvider(accountID) }
