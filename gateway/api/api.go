// Package api holds what every route area of the gateway shares: its
// dependencies and the account selectors.
package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/stream"
	"github.com/svc/engine/projections"
)

// Deps are the gateway's dependencies, shared by every route area.
type Deps struct {
	Engine    *engine.Engine
	Projector *projections.Projector
	Store     projections.Store
	Auth      *auth.Auth
	Hub       *stream.Hub
	Env       string // sandbox or production

	writes sync.Map // credential -> *atomic.Uint64, the sequence of its last write answered from its decision (Wrote)
}

// DefaultBroker is the broker of the engine's own paper book.
const DefaultBroker = "paper"

// Account resolves the request's `broker` and `account` selectors to one of the
// caller's accounts: omitted broker means the default; a present but unknown
// broker is 400; an account outside the caller's set is 400; never a fallback.
// It reads one account by its number or id, not the caller's whole list.
func (d *Deps) Account(r *http.Request) (projections.Account, error) {
	p, ok := httpx.PrincipalOf(r)
	if !ok {
		return projections.Account{}, httpx.Errorf(http.StatusUnauthorized, commands.CodeInvalidKey, "a valid API key is required")
	}
	broker, hasBroker := queryParam(r.URL, "broker")
	number, hasNumber := queryParam(r.URL, "account")
	if hasBroker && broker == "" {
		return projections.Account{}, httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "broker is empty")
	}
	if hasNumber && number == "" {
		return projections.Account{}, httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "account is empty")
	}
	if broker == "" {
		broker = DefaultBroker
	}
	ctx := r.Context()
	if number == "" {
		return d.defaultAccount(ctx, p, broker, hasBroker)
	}
	id, err := projections.GetInto[string](ctx, d.Store, projections.CollAccountNumber, broker+"/"+number)
	if errors.Is(err, projections.ErrNotFound) {
		id, err = number, nil // the selector may be the accountId
	}
	if err != nil {
		return projections.Account{}, err
	}
	a, err := projections.GetInto[projections.Account](ctx, d.Store, projections.CollAccount, id)
	if err == nil && a.Broker == broker {
		ok, err := d.Reaches(ctx, p, a)
		if err != nil || ok {
			return a, err
		}
	}
	if err != nil && !errors.Is(err, projections.ErrNotFound) {
		return projections.Account{}, err
	}
	if _, err := d.firstOn(ctx, p.TenantID, broker, func(projections.Account) bool { return true }); err != nil {
		return projections.Account{}, d.unknownBroker(hasBroker, broker, err)
	}
	return projections.Account{}, httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "account is not one of the caller's accounts on that broker")
}

// defaultAccount is Account without an account selector: the principal's
// first account on broker.
func (d *Deps) defaultAccount(ctx context.Context, p httpx.Principal, broker string, named bool) (projections.Account, error) {
	grants, err := d.grants(ctx, p)
	if err != nil {
		return projections.Account{}, err
	}
	a, err := d.firstOn(ctx, p.TenantID, broker, func(a projections.Account) bool { return Visible(p, a) && grants.has(a) })
	if errors.Is(err, projections.ErrNotFound) && grants != nil {
		if _, err := d.firstOn(ctx, p.TenantID, broker, func(a projections.Account) bool { return Visible(p, a) }); err == nil {
			return projections.Account{}, errDisconnected
		}
	}
	if errors.Is(err, projections.ErrNotFound) {
		a, err = d.firstIssued(ctx, p, broker)
	}
	if err != nil {
		return projections.Account{}, d.unknownBroker(named, broker, err)
	}
	return a, nil
}

// queryParam is u.Query().Get(key) and u.Query().Has(key) without parsing
// the whole query into a map: the first value of key among the pairs
// url.ParseQuery keeps (a pair with a semicolon, or that does not unescape,
// is left out). A query of many pairs is parsed by url.ParseQuery itself,
// which bounds their number.
func queryParam(u *url.URL, key string) (string, bool) {
	raw := u.RawQuery
	if strings.Count(raw, "&") >= 64 {
		q := u.Query()
		return q.Get(key), q.Has(key)
	}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, err := url.QueryUnescape(k)
		if err != nil || k != key {
			continue
		}
		if v, err = url.QueryUnescape(v); err != nil {
			continue
		}
		return v, true
	}
	return "", false
}

// errDisconnected answers a Connect app key acting for a trader on an account
// the trader disconnected the app from.
var errDisconnected = httpx.Errorf(http.StatusForbidden, commands.CodeAppDisconnected,
	"the trader disconnected this app from the account: the app no longer acts for them on it, until they connect it again through a new link")

// appGrants are the accounts a Connect app key acting for a trader reaches:
// those the trader connected to the app and has not disconnected since. Nil
// for every other principal, which it does not narrow.
type appGrants map[string]bool

func (g appGrants) has(a projections.Account) bool { return g == nil || g[a.AccountID] }

// grants reads the accounts the trader a Connect app key acts for grants the app.
func (d *Deps) grants(ctx context.Context, p httpx.Principal) (appGrants, error) {
	if p.App == nil || p.OnBehalfOf == "" {
		return nil, nil
	}
	t, err := projections.GetInto[projections.AppTrader](ctx, d.Store, projections.CollAppTrader, p.App.AppID+"/"+p.OnBehalfOf)
	if errors.Is(err, projections.ErrNotFound) {
		return appGrants{}, nil
	}
	g := appGrants{}
	for _, id := range t.Accounts {
		g[id] = true
	}
	return g, err
}

// Accounts lists every account the principal reaches: its tenant's that it
// sees (Visible), then those issued to its user's verified address (Issued).
func (d *Deps) Accounts(ctx context.Context, p httpx.Principal) ([]projections.Account, error) {
	own, err := projections.AccountsOf(ctx, d.Store, p.TenantID)
	if err != nil {
		return nil, err
	}
	grants, err := d.grants(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]projections.Account, 0, len(own))
	for _, a := range own {
		if Visible(p, a) && grants.has(a) {
			out = append(out, a)
		}
	}
	issued, err := d.Issued(ctx, p)
	return append(out, issued...), err
}

// Reaches reports whether the principal reaches the account: one of its
// tenant's that it sees (Visible) and, for a Connect app key acting for a
// trader, that the trader has not disconnected the app from (else 403
// app_disconnected); or one issued to its user's verified address.
func (d *Deps) Reaches(ctx context.Context, p httpx.Principal, a projections.Account) (bool, error) {
	if a.TenantID == p.TenantID {
		if !Visible(p, a) {
			return false, nil
		}
		grants, err := d.grants(ctx, p)
		if err == nil && !grants.has(a) {
			err = errDisconnected
		}
		return err == nil, err
	}
	if a.Email == "" {
		return false, nil
	}
	email, err := d.verifiedEmail(ctx, p)
	return email != "" && projections.EmailKey(email) == projections.EmailKey(a.Email), err
}

// Issued lists the accounts a firm or a venue issued, into its own tenant, to
// the address of the principal's user, once that user has verified it: a
// user's Trading API key or session trades them as its own. A key acting for
// someone else (x-svc-trader), and every other credential, gets none. It is
// read from the log's read models (the user's EmailVerified, the accounts by
// address), so it holds on every node and after a replay; an address no one
// has verified reaches nothing, whoever signed up with it.
func (d *Deps) Issued(ctx context.Context, p httpx.Principal) ([]projections.Account, error) {
	email, err := d.verifiedEmail(ctx, p)
	if err != nil || email == "" {
		return nil, err
	}
	accts, err := projections.AccountsOfEmail(ctx, d.Store, email)
	if err != nil {
		return nil, err
	}
	out := accts[:0]
	for _, a := range accts {
		if a.TenantID != p.TenantID { // the tenant's own are listed as its own
			out = append(out, a)
		}
	}
	return out, nil
}

// verifiedEmail is the verified address of the user a principal speaks for
// (a user's Trading API key or session, acting for no one else), or "".
func (d *Deps) verifiedEmail(ctx context.Context, p httpx.Principal) (string, error) {
	if (p.Kind != "trading" && p.Kind != "session") || p.OnBehalfOf != "" || p.TenantID == "" {
		return "", nil
	}
	u, err := projections.GetInto[projections.User](ctx, d.Store, projections.CollUser, p.TenantID)
	if errors.Is(err, projections.ErrNotFound) || (err == nil && !u.EmailVerified) {
		return "", nil
	}
	return u.Email, err
}

// firstIssued is the first account on broker issued to the principal's verified address.
func (d *Deps) firstIssued(ctx context.Context, p httpx.Principal, broker string) (projections.Account, error) {
	issued, err := d.Issued(ctx, p)
	if err != nil {
		return projections.Account{}, err
	}
	for _, a := range issued {
		if a.Broker == broker {
			return a, nil
		}
	}
	return projections.Account{}, projections.ErrNotFound
}

// Visible reports whether the principal reaches the account: every account of
// its tenant, or, for a venue key acting for a trader (x-svc-trader), the
// accounts the venue issued to that trader's email.
func Visible(p httpx.Principal, a projections.Account) bool {
	switch {
	case p.OnBehalfOf == "":
		return true
	case p.App != nil: // a Connect app key: the white-label paper it opened for that trader
		return a.AppID == p.App.AppID && a.Trader == p.OnBehalfOf
	}
	return a.VenueID != "" && strings.EqualFold(a.Email, p.OnBehalfOf)
}

func (d *Deps) unknownBroker(named bool, broker string, err error) error {
	if !errors.Is(err, projections.ErrNotFound) {
		return err
	}
	if named {
		return &httpx.Error{Status: http.StatusBadRequest, Code: commands.CodeInvalidRequest, Msg: "unknown broker", Params: map[string]any{"broker": broker}}
	}
	return httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "the caller has no account on the default broker; name one with broker and account")
}

// firstOn is the tenant's first account (in id order) on broker: the default account.
func (d *Deps) firstOn(ctx context.Context, tenantID, broker string, keep func(projections.Account) bool) (projections.Account, error) {
	var found projections.Account
	errFound := errors.New("found")
	err := d.Store.List(ctx, projections.CollTenantAccount, projections.Query{Prefix: tenantID + "/"}, func(_ string, decode func(any) error) error {
		var id string
		if err := decode(&id); err != nil {
			return err
		}
		a, err := projections.GetInto[projections.Account](ctx, d.Store, projections.CollAccount, id)
		if err != nil {
			return err
		}
		if a.Broker == broker && keep(a) {
			found = a
			return errFound
		}
		return nil
	})
	switch {
	case errors.Is(err, errFound):
		return found, nil
	case err != nil:
		return found, err
	}
	return found, projections.ErrNotFound
}

// OrgRole is the user's role in the organization now ("" when not a member).
func (d *Deps) OrgRole(ctx context.Context, orgID, userID string) (string, error) {
	m, err := projections.GetInto[projections.OrgMember](ctx, d.Store, projections.CollOrgMember, orgID+"/"+userID)
	if errors.Is(err, projections.ErrNotFound) {
		return "", nil
	}
	return m.Role, err
}

// Principal is the request's principal as the engine records it.
func Principal(r *http.Request) events.Principal {
	p, _ := httpx.PrincipalOf(r)
	return p.Principal
}

// SettleTimeout bounds the read-your-writes wait after a commit.
const SettleTimeout = 10 * time.Second

// Settle waits until the read models show the commit res made (read-your-writes).
// The write is recorded whatever happens here, so a read model that does not
// catch up in time (or a projector that stopped) is not a refusal: the answer
// is 202 write_recorded with the commit's revision, never a 503 that would
// say nothing was sent. A caller that went away gets its context's error.
func (d *Deps) Settle(ctx context.Context, res engine.Result) error {
	if res.Seq == 0 {
		return nil
	}
	if h := seqOf(ctx); h != nil {
		raise(h, res.Seq)
	}
	wctx, cancel := context.WithTimeout(ctx, SettleTimeout)
	defer cancel()
	err := d.Projector.WaitFor(wctx, res.Seq)
	if err == nil || ctx.Err() != nil {
		return err
	}
	return WriteRecorded(res.Seq)
}

// WriteRecorded is the answer to a write that is in the log while the read
// models do not show it yet: 202 with code write_recorded and the revision.
func WriteRecorded(seq uint64) *httpx.Error {
	return &httpx.Error{Status: http.StatusAccepted, Code: commands.CodeWriteRecorded, Params: map[string]any{"revision": seq},
		Msg: "the write is recorded at this revision, but the read models are behind; read it back later or follow the account stream; do not resend it under a new id"}
}

// Decide runs cmd on an account without waiting for the read models: the
// caller answers from the decision (res.Events) and the credential's next
// read waits for the read models to show the commit (Wrote, CatchUp).
func (d *Deps) Decide(r *http.Request, accountID, key string, cmd commands.Command) (engine.Result, error) {
	env := d.Engine.Envelope(Principal(r), key, cmd)
	res, err := d.Engine.Account(r.Context(), accountID, env)
	if err == nil {
		d.Wrote(r, res.Seq)
	}
	return res, err
}

// Wrote records that the request's credential wrote at seq.
func (d *Deps) Wrote(r *http.Request, seq uint64) {
	committedAt(r, seq)
	p, ok := httpx.PrincipalOf(r)
	if !ok || seq == 0 {
		return
	}
	c := p.Credential()
	v, ok := d.writes.Load(c)
	if !ok {
		v, _ = d.writes.LoadOrStore(c, new(atomic.Uint64))
	}
	last := v.(*atomic.Uint64)
	for old := last.Load(); old < seq && !last.CompareAndSwap(old, seq); old = last.Load() {
	}
}

// LastWrite is the log sequence of the newest write answered from its
// decision (Wrote), which the read models owe its credential; 0 for none.
func (d *Deps) LastWrite() uint64 {
	var last uint64
	d.writes.Range(func(_, v any) bool {
		last = max(last, v.(*atomic.Uint64).Load())
		return true
	})
	return last
}

// Projected waits, at most timeout, until the read models show every write
// answered from its decision: a stopping engine lets them catch up, so what
// it acknowledged is in the read models it leaves behind.
func (d *Deps) Projected(timeout time.Duration) error {
	last := d.LastWrite()
	if last == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.Projector.WaitFor(ctx, last)
}

// CatchUp makes a read wait until the read models show the last write its
// credential was answered from a decision for (read-your-writes): at most
// SettleTimeout (at once while the projector has failed), then 503
// read_models_behind with Retry-After, never a read that misses the
// caller's own write. Writes pass: the aggregate decides them.
func (d *Deps) CatchUp(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			if p, ok := httpx.PrincipalOf(r); ok {
				if seq, ok := d.writes.Load(p.Credential()); ok {
					ctx, cancel := context.WithTimeout(r.Context(), SettleTimeout)
					err := d.Projector.WaitFor(ctx, seq.(*atomic.Uint64).Load())
					cancel()
					if err != nil && r.Context().Err() == nil {
						httpx.WriteError(w, r, httpx.Trading, httpx.Unavailable(commands.CodeReadModelsBehind,
							"the read models are behind your last write; nothing is lost: read again after the Retry-After seconds"))
						return
					}
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Exec runs cmd on an account and waits for the read models to show it.
func (d *Deps) Exec(r *http.Request, accountID, key string, cmd commands.Command) (engine.Result, error) {
	env := d.Engine.Envelope(Principal(r), key, cmd)
	res, err := d.Engine.Account(r.Context(), accountID, env)
	if err != nil {
		return res, err
	}
	return res, d.Settle(r.Context(), res)
}

// IdempotentID names the resource a create makes: a new id, or, when the
// request carries an Idempotency-Key (1 to 128 characters), an id derived
// from the owner and the key, so a retry meets the first write's aggregate;
// digest is then the body's digest, which that aggregate compares (same key,
// other body: 409).
func IdempotentID(r *http.Request, prefix, owner string, body any) (id, digest string, err error) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return prefix + ulid.Make().String(), "", nil
	}
	if err := commands.Identifier("Idempotency-Key", key, 128); err != nil {
		return "", "", err
	}
	sum := sha256.Sum256([]byte(owner + "\x00" + key))
	b, _ := json.Marshal(body)
	d := sha256.Sum256(b)
	return prefix + hex.EncodeToString(sum[:13]), hex.EncodeToString(d[:]), nil
}
