package gateway

import (
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/gateway/account"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/challenges"
	connectgw "github.com/svc/engine/gateway/connect"
	"github.com/svc/engine/gateway/copier"
	"github.com/svc/engine/gateway/exitplans"
	firmgw "github.com/svc/engine/gateway/firm"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
	"github.com/svc/engine/gateway/identity"
	marketgw "github.com/svc/engine/gateway/market"
	newsgw "github.com/svc/engine/gateway/news"
	"github.com/svc/engine/gateway/operator"
	"github.com/svc/engine/gateway/risk"
	"github.com/svc/engine/gateway/trading"
	venuegw "github.com/svc/engine/gateway/venue"
)

// Areas are the route areas beyond trading, account and risk, each served
// when it is configured (nil: its routes answer 404 like any unknown route).
type Areas struct {
	Market   *marketgw.Market  // market data: key or browser origin
	News     *newsgw.Deps      // news and the economic calendar: key or browser origin
	Firm     *firmgw.Config    // the firm area under /api/partner/: partner key
	Operator *operator.Config  // the operator's routes: operator session cookie
	Identity *identity.Config  // people, sessions and their keys
	Exits    *exitplans.Config // saved exit plans and their preview
	Connect  *connectgw.Config // Connect: dashboard, links, hosted Connect (needs Identity)
	// Challenges: programs and enrollments, a signed-in session only; nil
	// (CHALLENGES_ENABLED unset) and every one of its routes is 404.
	Challenges *challenges.Config
}

// routes is the route table: every route the engine serves, grouped by the
// credential that admits it, each with its method and handler. Middleware
// (origin check, credential, rate limit, draining) is set on the groups in
// Handler.
//
//   - key: a Trading API key (svc_sk_...)
//   - firm: a partner key; paths under /api/partner/
//   - open: the Origin check only; each handler admits its caller itself:
//     market data takes a Trading API key or an allowed browser Origin, news
//     and the calendar a signed-in session too, the news image proxy takes
//     anyone, operator routes an operator's session cookie and never a key,
//     /api/auth/ anyone (sign-up, sign-in, tokens) as are the pages of the
//     mails' links (/verify-email, /password-reset), /api/keys a session only,
//     /api/account/demo a session or a Trading API key
//
// It answers the firm area's handlers (nil when the area is not served): the
// venue routes' twins of the partner routes run them too.
func routes(d *api.Deps, a Areas, id *identity.Handlers, g *guarded, key, firm, open *mux.Router) *firmgw.Handlers {
	serve := func(h httpx.Handler) http.Handler { return httpx.Serve(httpx.Trading, h) }
	get := func(r *mux.Router, path string, h http.Handler) { r.Handle(path, h).Methods(http.MethodGet) }
	post := func(r *mux.Router, path string, h http.Handler) { r.Handle(path, h).Methods(http.MethodPost) }
	put := func(r *mux.Router, path string, h http.Handler) { r.Handle(path, h).Methods(http.MethodPut) }
	del := func(r *mux.Router, path string, h http.Handler) { r.Handle(path, h).Methods(http.MethodDelete) }
	patch := func(r *mux.Router, path string, h http.Handler) { r.Handle(path, h).Methods(http.MethodPatch) }

	// Open: market data and news (a Trading API key or an allowed browser Origin).
	if a.Market != nil {
		m, admit := marketgw.New(d, a.Market), marketgw.Admit(d)
		get(open, "/api/instruments", admit(serve(m.Instruments)))
		get(open, "/api/market/config", admit(serve(m.Config)))
		get(open, "/api/market/search", admit(serve(m.Search)))
		get(open, "/api/market/symbol-info", admit(serve(m.SymbolInfo)))
		get(open, "/api/market/quotes", admit(serve(m.Quotes)))
		get(open, "/api/market/time", admit(serve(m.Clock)))
		get(open, "/api/market/history", admit(serve(m.History)))
		get(open, "/api/market/stream", admit(serve(m.Stream)))
		get(open, "/api/market/streams", admit(serve(m.Streams)))
	}
	if a.News != nil {
		n, admit := newsgw.New(a.News), marketgw.AdmitWithSession(d)
		get(open, "/api/news", admit(serve(n.List)))
		get(open, "/api/news/stream", admit(serve(n.Stream)))
		get(open, "/api/news/image/{id}", serve(n.Image)) // images the feed named, to anyone
		get(open, "/api/calendar", admit(serve(n.Calendar)))
		get(open, "/api/calendar/stream", admit(serve(n.CalendarStream)))
	}
	// Open: identity (anyone for sign-up, sign-in and tokens; a session for the rest).
	if id != nil {
		session := d.Auth.RequireSession(httpx.Trading)
		post(open, "/api/auth/signup", serve(id.Signup))
		post(open, "/api/auth/verify", serve(id.Verify))
		post(open, "/api/auth/verify/resend", serve(id.ResendVerification))
		post(open, "/api/auth/login", serve(id.Login))
		get(open, "/api/auth/me", serve(id.Me))
		post(open, "/api/auth/logout", session(serve(id.Logout)))
		post(open, "/api/auth/password-reset", serve(id.PasswordReset))
		post(open, "/api/auth/password-reset/confirm", serve(id.PasswordResetConfirm))
		// The pages the mails' links open (a person's click there POSTs to the routes above).
		get(open, "/verify-email", http.HandlerFunc(id.VerifyPage))
		get(open, "/password-reset", http.HandlerFunc(id.ResetPage))
		post(open, "/api/keys", session(serve(id.IssueKey)))
		get(open, "/api/keys", session(serve(id.ListKeys)))
		del(open, "/api/keys/{id}", session(serve(id.RevokeKey)))
		post(open, "/api/account/demo", d.Auth.KeyOrSession(httpx.Trading)(serve(id.OpenDemo)))
		// A trader's own account at a provider (clock observation): link and unlink.
		links := account.New(d)
		post(open, "/api/account/providers", session(serve(links.LinkProvider)))
		del(open, "/api/account/providers/{accountId}", session(serve(links.UnlinkProvider)))
		// The user's live trading switch (orders on provider accounts): on with the password again.
		get(open, "/api/account/live-trading", d.Auth.KeyOrSession(httpx.Trading)(serve(id.LiveTrading)))
		post(open, "/api/account/live-trading", session(serve(id.SetLiveTrading)))
		post(open, "/api/organizations", session(serve(id.CreateOrg)))
		get(open, "/api/organizations", session(serve(id.ListOrgs)))
		get(open, "/api/organizations/{id}/members", session(serve(id.Members)))
		post(open, "/api/organizations/{id}/members", session(serve(id.Invite)))
		del(open, "/api/organizations/{id}/members/{userId}", session(serve(id.RemoveMember)))
		post(open, "/api/organizations/{id}/invitations/accept", session(serve(id.Accept)))
	}
	// Open: exit plans (a Trading API key or a session).
	var plans trading.ExitPlans
	if a.Exits != nil {
		x, either := exitplans.New(d, *a.Exits), d.Auth.KeyOrSession(httpx.Trading)
		plans = x
		post(key, "/api/trading/exits", serve(x.Protect))
		patch(key, "/api/trading/exits/{id}", serve(x.Change))
		del(key, "/api/trading/exits/{id}", serve(x.Withdraw))
		get(key, "/api/account/brackets", serve(x.Brackets))
		get(key, "/api/account/managed-exits", serve(x.ManagedExits))
		get(open, "/api/exit-plans", either(serve(x.List)))
		post(open, "/api/exit-plans", either(serve(x.Create)))
		put(open, "/api/exit-plans/{id}", either(serve(x.Replace)))
		del(open, "/api/exit-plans/{id}", either(serve(x.Delete)))
		post(open, "/api/account/exit-plans/preview", either(serve(x.Preview)))
	}
	// Open: the operator (an operator session cookie; keys are refused).
	if a.Operator != nil {
		op := operator.New(d, *a.Operator)
		const venue = "/api/operator/venues/{venueId}"
		get(open, venue+"/balance-ops/{referenceId}", op.Serve(operator.ScopeAccountRead, op.Receipt))
		post(open, venue+"/accounts/{accountNumber}/reconciliation-hold", op.Serve(operator.ScopeAccountWrite, op.Hold))
		del(open, venue+"/accounts/{accountNumber}/reconciliation-hold", op.Serve(operator.ScopeAccountWrite, op.Release))
	}

	// Open: challenges (a signed-in session; keys are refused; writes keyed by Idempotency-Key).
	if a.Challenges != nil {
		ch, session := challenges.New(d, *a.Challenges), d.Auth.RequireSession(httpx.Trading)
		keyed := func(h idem.Handler) http.Handler {
			return session(idem.Require(httpx.Trading)(idem.Serve(httpx.Trading, h)))
		}
		get(open, "/api/challenges", session(serve(ch.List)))
		put(open, "/api/challenges/{id}", keyed(ch.Author))
		post(open, "/api/enrollments", keyed(ch.Enroll))
		get(open, "/api/enrollments", session(serve(ch.Mine)))
		post(open, "/api/enrollments/reset", keyed(ch.Reset))
		get(open, "/api/enrollments/events", session(serve(ch.Events)))
	}

	// Firm: a partner key.
	var f *firmgw.Handlers
	if a.Firm != nil {
		f = firmgw.New(d, *a.Firm)
		rel := func(path string) string { return strings.TrimPrefix(path, "/api/partner") }
		post(firm, rel("/api/partner/accounts"), serve(f.Provision))
		get(firm, rel("/api/partner/accounts"), serve(f.ListAccounts))
		post(firm, rel("/api/partner/accounts/reset"), serve(f.Reset))
		get(firm, rel("/api/partner/accounts/risk"), serve(f.GetRisk))
		put(firm, rel("/api/partner/accounts/risk"), serve(f.PutRisk))
		post(firm, rel("/api/partner/accounts/halt"), serve(f.Halt))
		post(firm, rel("/api/partner/accounts/resume"), serve(f.Resume))
		post(firm, rel("/api/partner/balance-op"), serve(f.BalanceOp))
		get(firm, rel("/api/partner/usage"), serve(f.Usage))
		get(firm, rel("/api/partner/usage/accounts"), serve(f.UsageAccounts))
		post(firm, rel("/api/partner/webhooks"), serve(f.RegisterWebhook))
		get(firm, rel("/api/partner/webhooks"), serve(f.ListWebhooks))
		del(firm, rel("/api/partner/webhooks"), serve(f.RemoveNamedWebhook))
		post(firm, rel("/api/partner/webhooks/test"), serve(f.TestWebhook))
		get(firm, rel("/api/partner/webhooks/deliveries"), serve(f.Deliveries))
		del(firm, rel("/api/partner/webhooks/{id}"), serve(f.RemoveWebhook))
		post(firm, rel("/api/partner/connect/accounts"), serve(f.CreateRegistration))
		get(firm, rel("/api/partner/connect/accounts"), serve(f.ListRegistrations))
		del(firm, rel("/api/partner/connect/accounts/{id}"), serve(f.RevokeRegistration))
		// A trader's side of a registration: a signed-in, verified trader's session.
		session := d.Auth.RequireSession(httpx.Trading)
		get(open, "/api/connect/registrations", session(serve(f.TraderRegistrations)))
		post(open, "/api/connect/registrations/{id}/link", session(serve(f.LinkRegistration)))
	}

	// Key: a Trading API key.
	tr := trading.New(d, plans)
	post(key, "/api/trading/order", serve(tr.Order))
	post(key, "/api/trading/cancel", serve(tr.Cancel))
	post(key, "/api/trading/replace", serve(tr.Replace))
	post(key, "/api/trading/close", serve(tr.Close))
	post(key, "/api/trading/flatten", serve(tr.Flatten))
	post(key, "/api/trading/reverse", serve(tr.Reverse))
	get(key, "/api/trading/actions", serve(tr.Actions))
	ac := account.New(d)
	get(key, "/api/account/list", serve(ac.List))
	get(key, "/api/account/snapshot", serve(ac.Snapshot))
	get(key, "/api/account/stream", serve(ac.Stream))
	get(key, "/api/account/orders", serve(ac.Orders))
	get(key, "/api/account/fills", serve(ac.Fills))
	get(key, "/api/account/pnl-history", serve(ac.Pnl))
	get(key, "/api/account/instruments", serve(ac.Instruments))
	rk := risk.New(d)
	get(key, "/api/risk", serve(rk.Get))
	put(key, "/api/risk", serve(rk.Put))
	post(key, "/api/risk/unlock", serve(rk.Unlock))
	copierRoutes(d, id != nil, g, key, open)
	return f
}

// copierRoutes are the copier's routes (gateway/copier): the key routes'
// credentials (a Trading API key, a venue key with trader:trade, a Connect
// app key acting for its trader) when the request carries Authorization,
// else, with identity served, a signed-in session; writes keyed by
// Idempotency-Key.
func copierRoutes(d *api.Deps, sessions bool, g *guarded, key, open *mux.Router) {
	cp := copier.New(d)
	const groups = "/api/copier/groups"
	keyed := func(h idem.Handler) http.Handler { return idem.Require(httpx.Trading)(idem.Serve(httpx.Trading, h)) }
	serve := func(h httpx.Handler) http.Handler { return httpx.Serve(httpx.Trading, h) }
	hasKey := func(r *http.Request, _ *mux.RouteMatch) bool { return r.Header.Get("Authorization") != "" }
	noKey := func(r *http.Request, m *mux.RouteMatch) bool { return !hasKey(r, m) }
	session := d.Auth.RequireSession(httpx.Trading)
	for _, rt := range []struct {
		method, path string
		h            http.Handler
	}{
		{http.MethodPost, groups, keyed(cp.Create)},
		{http.MethodGet, groups, serve(cp.List)},
		{http.MethodGet, groups + "/{groupId}", serve(cp.Get)},
		{http.MethodGet, groups + "/{groupId}/mirrors", serve(cp.Mirrors)},
		{http.MethodGet, groups + "/{groupId}/stream", serve(cp.Stream)},
		{http.MethodPut, groups + "/{groupId}/followers/{accountId}", keyed(cp.PutFollower)},
		{http.MethodDelete, groups + "/{groupId}/followers/{accountId}", keyed(cp.RemoveFollower)},
	} {
		g.only(key.Handle(rt.path, rt.h).Methods(rt.method), hasKey)
		if sessions {
			g.only(open.Handle(rt.path, session(rt.h)).Methods(rt.method), noKey)
		}
	}
}

// venueRoutes is the venue platform's route table: venues (a venue key;
// /api/partner/venues/ holds the spec's named routes, /api/venues/ the rest)
// and their back-office twins (a verified owner's session; the same doors'
// checks, handlers and commands). Writes answer through idem.Serve. f is the
// firm area's handlers, which the twins of the legacy partner routes run (nil:
// the firm area is not served, nor are the twins).
func venueRoutes(d *api.Deps, f *firmgw.Handlers, venues, partnerVenues, backOffice *mux.Router) {
	v := venuegw.New(d, nil)
	read := venuegw.Serve
	keyed := func(h idem.Handler) http.Handler { return idem.Serve(httpx.Venue, h) }
	// The routers are subrouters of their prefix: a route is its path after it.
	prefixes := map[*mux.Router]string{venues: "/api/venues", partnerVenues: "/api/partner/venues", backOffice: "/api/back-office"}
	on := func(r *mux.Router, method, path string, h http.Handler) {
		r.Handle(strings.TrimPrefix(path, prefixes[r]), h).Methods(method)
	}
	key := v.KeyDoor
	const (
		pv = "/api/partner/venues/{venueId}"
		vv = "/api/venues/{venueId}"
		bv = "/api/back-office/venues/{venueId}"
	)
	manage, readers := venuecmd.ScopeProviderManage, []string{venuecmd.ScopeProviderManage, venuecmd.ScopeAccountRead}

	on(partnerVenues, http.MethodPost, pv+"/providers", key(manage)(keyed(v.RegisterProvider)))
	on(partnerVenues, http.MethodGet, pv+"/providers", key(readers...)(read(v.ListProviders)))
	on(partnerVenues, http.MethodGet, pv+"/providers/{providerId}", key(readers...)(read(v.GetProvider)))
	on(venues, http.MethodGet, vv, key(venuecmd.Scopes...)(read(v.GetVenue)))
	on(venues, http.MethodPost, vv+"/providers", key(manage)(keyed(v.RegisterProvider)))
	on(venues, http.MethodGet, vv+"/providers", key(readers...)(read(v.ListProviders)))
	on(venues, http.MethodGet, vv+"/providers/{providerId}", key(readers...)(read(v.GetProvider)))

	// The venue's configuration, and the accounts it issues into its groups.
	kinds := "/{kind:" + strings.Join(venuecmd.ConfigKinds, "|") + "}"
	config, configReaders := venuecmd.ScopeConfigManage, []string{venuecmd.ScopeConfigManage, venuecmd.ScopeAccountRead}
	accountManage, accountRead := venuecmd.ScopeAccountManage, []string{venuecmd.ScopeAccountRead, venuecmd.ScopeAccountManage}
	// A door is a router, the path its routes start with, and its admission:
	// a venue key with one of the route's scopes, or an owner's session.
	type door struct {
		r     *mux.Router
		base  string
		admit func(scopes ...string) func(http.Handler) http.Handler
	}
	backOfficeDoor := door{backOffice, bv, func(...string) func(http.Handler) http.Handler { return v.OwnerDoor }}
	for _, d := range []door{{venues, vv, key}, backOfficeDoor} {
		on(d.r, http.MethodGet, d.base+kinds, d.admit(configReaders...)(read(v.ListConfig)))
		on(d.r, http.MethodGet, d.base+kinds+"/{id}", d.admit(configReaders...)(read(v.GetConfig)))
		on(d.r, http.MethodPut, d.base+kinds+"/{id}", d.admit(config)(keyed(v.PutConfig)))
		on(d.r, http.MethodDelete, d.base+kinds+"/{id}", d.admit(config)(keyed(v.RetireConfig)))
		on(d.r, http.MethodPut, d.base+"/risk-policies/{policyId}/versions/{version}", d.admit(config)(keyed(v.StatePolicy)))
		on(d.r, http.MethodPost, d.base+"/risk-policies/{policyId}/publish", d.admit(config)(keyed(v.PublishPolicy)))
		on(d.r, http.MethodGet, d.base+"/risk-policies/{policyId}", d.admit(configReaders...)(read(v.GetPolicy)))
		on(d.r, http.MethodPost, d.base+"/accounts", d.admit(accountManage)(keyed(v.IssueAccount)))
		on(d.r, http.MethodGet, d.base+"/accounts", d.admit(accountRead...)(read(v.ListAccounts)))
		// Holds on live trading for the venue's traders (gateway/venue/livehold.go).
		on(d.r, http.MethodGet, d.base+"/live-trading", d.admit(accountRead...)(read(v.GetLive)))
		on(d.r, http.MethodPost, d.base+"/live-trading/hold", d.admit(accountManage)(keyed(v.HoldLive)))
		on(d.r, http.MethodPost, d.base+"/live-trading/release", d.admit(accountManage)(keyed(v.ReleaseLive)))
	}

	// The twins of the legacy partner routes (halt and resume, balance
	// operations and receipts, usage, webhooks): the same commands, for the
	// venue's firm tenant (AsFirm), errors in the venue shape.
	if f != nil {
		tw, asFirm := v.Twins(f), venuegw.AsFirm
		acctManage, acctRead, hooks := venuecmd.ScopeAccountManage, venuecmd.ScopeAccountRead, venuecmd.ScopeWebhookManage
		for _, d := range []door{{partnerVenues, pv, key}, backOfficeDoor} {
			on(d.r, http.MethodPost, d.base+"/accounts/{accountId}/halt", d.admit(acctManage)(asFirm(keyed(tw.Halt))))
			on(d.r, http.MethodPost, d.base+"/accounts/{accountId}/resume", d.admit(acctManage)(asFirm(keyed(tw.Resume))))
			on(d.r, http.MethodPost, d.base+"/accounts/{accountId}/reset", d.admit(acctManage)(asFirm(read(tw.Reset))))
			on(d.r, http.MethodPost, d.base+"/balance-ops", d.admit(acctManage)(asFirm(read(tw.BalanceOp))))
			on(d.r, http.MethodGet, d.base+"/balance-ops/{referenceId}", d.admit(acctRead, acctManage)(read(tw.Receipt)))
			on(d.r, http.MethodGet, d.base+"/usage", d.admit(acctRead)(asFirm(read(f.Usage))))
			on(d.r, http.MethodGet, d.base+"/usage/accounts", d.admit(acctRead)(asFirm(read(f.UsageAccounts))))
			on(d.r, http.MethodPost, d.base+"/webhooks", d.admit(hooks)(asFirm(read(tw.RegisterWebhook))))
			on(d.r, http.MethodGet, d.base+"/webhooks", d.admit(hooks)(asFirm(read(f.ListWebhooks))))
			on(d.r, http.MethodPost, d.base+"/webhooks/test", d.admit(hooks)(asFirm(keyed(tw.TestWebhook))))
			on(d.r, http.MethodGet, d.base+"/webhooks/deliveries", d.admit(hooks)(asFirm(read(f.Deliveries))))
			on(d.r, http.MethodDelete, d.base+"/webhooks/{id}", d.admit(hooks)(asFirm(keyed(tw.RemoveWebhook))))
		}
	}

	owner := v.OwnerDoor
	on(backOffice, http.MethodPost, "/api/back-office/venues", keyed(v.CreateVenue))
	on(backOffice, http.MethodGet, "/api/back-office/venues", read(v.ListVenues))
	on(backOffice, http.MethodGet, bv, owner(read(v.GetVenue)))
	on(backOffice, http.MethodPost, bv+"/keys", owner(read(v.IssueKey)))
	on(backOffice, http.MethodGet, bv+"/keys", owner(read(v.ListKeys)))
	on(backOffice, http.MethodDelete, bv+"/keys/{keyId}", owner(keyed(v.RevokeKey)))
	on(backOffice, http.MethodPost, bv+"/providers", owner(keyed(v.RegisterProvider)))
	on(backOffice, http.MethodGet, bv+"/providers", owner(read(v.ListProviders)))
	on(backOffice, http.MethodGet, bv+"/providers/{providerId}", owner(read(v.GetProvider)))
}

// connectRoutes is Connect's route table: the dashboard (a Connect dashboard
// session from the dashboard's origin; sign-in and the sandbox's statement
// exchange open), the link routes (a Connect app key from the app's server;
// every write with an Idempotency-Key) and hosted Connect (its page, and its
// frame session's routes). Links and hosted Connect are served on the
// sandbox only (the spec's preview).
func connectRoutes(d *api.Deps, ls layers, c *connectgw.Handlers, id *identity.Handlers, root, open *mux.Router) {
	serve := func(h httpx.Handler) http.Handler { return httpx.Serve(connectgw.Fam, h) }
	keyed := func(h idem.Handler) http.Handler { return idem.Serve(connectgw.Fam, h) }
	const dash = "/api/connect/dashboard"
	open.Handle(dash+"/login", serve(id.DashboardLogin)).Methods(http.MethodPost)
	open.Handle(dash+"/exchange", serve(c.Exchange)).Methods(http.MethodPost)

	board := ls.sub(root, root.PathPrefix(dash).Subrouter(), d.Auth.RequireDashboard(connectgw.Fam), d.Auth.Writes(connectgw.Fam))
	boardKeyed := ls.sub(board, board.NewRoute().Subrouter(), idem.Require(connectgw.Fam))
	on := func(r *mux.Router, method, path string, h http.Handler) {
		r.Handle(strings.TrimPrefix(path, dash), h).Methods(method)
	}
	on(board, http.MethodPost, dash+"/logout", serve(id.DashboardLogout))
	on(board, http.MethodGet, dash+"/me", serve(id.DashboardMe))
	on(board, http.MethodPost, dash+"/statement", serve(c.Statement))
	on(board, http.MethodGet, dash+"/apps", serve(c.ListApps))
	on(boardKeyed, http.MethodPost, dash+"/apps", keyed(c.CreateApp))
	on(board, http.MethodGet, dash+"/apps/{appId}", serve(c.GetApp))
	on(boardKeyed, http.MethodPatch, dash+"/apps/{appId}", keyed(c.UpdateApp))
	on(board, http.MethodGet, dash+"/apps/{appId}/traders", serve(c.ListTraders))
	on(boardKeyed, http.MethodPost, dash+"/apps/{appId}/keys", serve(c.IssueKey))
	on(board, http.MethodGet, dash+"/apps/{appId}/keys", serve(c.ListKeys))
	on(boardKeyed, http.MethodDelete, dash+"/apps/{appId}/keys/{keyId}", keyed(c.RevokeKey))

	if d.Env == "production" {
		return
	}
	links := ls.sub(root, root.PathPrefix("/api/connect/links").Subrouter(),
		d.Auth.RequireConnectKey(connectgw.Fam), c.AppDoor, d.Auth.Writes(connectgw.Fam), idem.Require(connectgw.Fam))
	links.Handle("", serve(c.CreateLink)).Methods(http.MethodPost)
	links.Handle("", serve(c.ListLinks)).Methods(http.MethodGet)
	links.Handle("/{linkId}", serve(c.GetLink)).Methods(http.MethodGet)
	links.Handle("/{linkId}", keyed(c.CloseLink)).Methods(http.MethodDelete)

	root.Handle("/connect/hosted/{linkId}", http.HandlerFunc(c.Page)).Methods(http.MethodGet)
	open.Handle("/api/connect/hosted/session", serve(c.Session)).Methods(http.MethodGet)
	open.Handle("/api/connect/hosted/connect", serve(c.Connect)).Methods(http.MethodPost)
	open.Handle("/api/connect/hosted/disconnect", serve(c.Disconnect)).Methods(http.MethodPost)
	open.Handle("/api/connect/hosted/providers", serve(c.LinkProvider)).Methods(http.MethodPost)
	open.Handle("/api/connect/hosted/live-consent/withdraw", serve(c.WithdrawConsent)).Methods(http.MethodPost)
	open.Handle("/api/connect/hosted/cancel", serve(c.Cancel)).Methods(http.MethodPost)
}
