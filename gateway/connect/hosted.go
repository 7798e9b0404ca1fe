package connect

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	connectcmd "github.com/svc/engine/commands/connect"
	firmcmd "github.com/svc/engine/commands/firm"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evconnect "github.com/svc/engine/events/connect"
	"github.com/svc/engine/gateway/account"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// FrameLife bounds a frame session: hosted Connect's page must be opened again after it.
const FrameLife = 30 * time.Minute

// frameToken is a frame session: the link it is bound to and its end.
type frameToken struct {
	Link string `json:"l"`
	Exp  int64  `json:"exp"`
}

// hostedSystem is the principal of hosted Connect's own commits.
var hostedSystem = events.Principal{System: "connect-hosted"}

// frameAncestors is the page's Content-Security-Policy: only the app's
// websites may embed it, and it runs only its own script and style.
func frameAncestors(websites []string, nonce string) string {
	anc := "'none'"
	if len(websites) > 0 {
		anc = strings.Join(websites, " ")
	}
	return "default-src 'none'; img-src https:; connect-src 'self'; base-uri 'none'; form-action 'none'; " +
		"script-src 'nonce-" + nonce + "'; style-src 'nonce-" + nonce + "'; frame-ancestors " + anc
}

// Page serves hosted Connect on a link (GET /connect/hosted/{linkId}?token=):
// it checks the link's token, mounts the link (created -> mounted) and opens
// a frame session bound to it. Only the app's websites may embed the page.
// A closed, expired or connected link gets a page saying so. The page says
// who runs it, names the app (its logo only from an https URL), what the app
// may do once connected, and offers the trader's accounts connected before,
// a form per provider the engine links, the app's white-label paper and a
// cancel; it shows its own sentence for each error code, never the API's.
func (h *Handlers) Page(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["linkId"]
	var tok linkToken
	nonce := newNonce()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	fail := func(status int, websites []string, msg string) {
		w.Header().Set("Content-Security-Policy", frameAncestors(websites, nonce))
		h.render(w, status, page{Nonce: nonce, Operator: h.operator(), Error: msg})
	}
	if len(id) > 64 || !h.links.Open(r.URL.Query().Get("token"), &tok) || tok.Link != id {
		fail(http.StatusNotFound, nil, "This Connect link is not valid. Go back to the app and start again.")
		return
	}
	l, found, err := h.d.Engine.LinkState(r.Context(), id)
	if err != nil || !found {
		fail(http.StatusServiceUnavailable, nil, "Connect cannot be reached right now. Try again in a moment.")
		return
	}
	a, err := h.app(r.Context(), l.AppID)
	if err != nil {
		fail(http.StatusServiceUnavailable, nil, "Connect cannot be reached right now. Try again in a moment.")
		return
	}
	env := h.d.Engine.Envelope(hostedSystem, "", &connectcmd.MountLink{})
	res, err := h.d.Engine.Link(r.Context(), id, env)
	if err == nil {
		err = h.d.Settle(r.Context(), res)
	}
	if err != nil {
		var ref *commands.Refusal
		if errors.As(err, &ref) {
			fail(commands.StatusOf(ref.Code, ref.Malformed), a.Settings.Websites, ref.Msg)
			return
		}
		fail(http.StatusServiceUnavailable, a.Settings.Websites, "Connect cannot be reached right now. Try again in a moment.")
		return
	}
	w.Header().Set("Content-Security-Policy", frameAncestors(a.Settings.Websites, nonce))
	frame := h.frames.Seal(frameToken{Link: id, Exp: h.cfg.Now().Add(FrameLife).Unix()})
	h.render(w, http.StatusOK, page{Nonce: nonce, Operator: h.operator(), App: a.Settings.Name, Logo: logo(a.Settings.LogoURL), Frame: frame, Link: id,
		Scopes: scopes, Providers: h.providers(), Words: pageWords})
}

func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

type page struct {
	Nonce, Operator, App, Logo, Frame, Link, Error string
	Scopes                                         []string
	Providers                                      []providerInfo
	Words                                          string // errorWords and errorOther, JSON, for the page's script
}

func (h *Handlers) render(w http.ResponseWriter, status int, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = hostedPage.Execute(w, p)
}

// errFrame is the answer to a request without a live frame session.
var errFrame = httpx.Errorf(http.StatusUnauthorized, commands.CodeFrameSessionRequired, "hosted Connect's routes take the frame session its page opened: open the link's hosted URL again")

// frame resolves the request's frame session to its link, read from the
// link's aggregate: a closed, failed or expired link ends the session.
func (h *Handlers) frame(r *http.Request) (evconnect.Link, projections.App, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Frame ")
	var f frameToken
	if !ok || !h.frames.Open(tok, &f) || h.cfg.Now().Unix() >= f.Exp {
		return evconnect.Link{}, projections.App{}, errFrame
	}
	l, found, err := h.d.Engine.LinkState(r.Context(), f.Link)
	if err != nil {
		return l, projections.App{}, err
	}
	if !found {
		return l, projections.App{}, errFrame
	}
	if l.State == evconnect.StateClosed || l.State == evconnect.StateFailed || l.Expired(h.cfg.Now()) {
		code, msg := commands.CodeLinkClosed, "the app closed this Connect link: the session on it ended; go back to the app and start again"
		if l.Disconnected {
			msg = "you disconnected the app from the account this Connect link connected: the session on it ended; go back to the app to connect again"
		}
		if l.State != evconnect.StateClosed {
			code, msg = commands.CodeLinkExpired, "this Connect link expired: the session on it ended; go back to the app and start again"
		}
		return l, projections.App{}, &httpx.Error{Status: http.StatusGone, Code: code, Msg: msg}
	}
	a, err := h.app(r.Context(), l.AppID)
	return l, a, err
}

// granted are the ids of the accounts the app acts on for the trader now:
// connected through a link and not disconnected since.
func (h *Handlers) granted(ctx context.Context, a projections.App, trader string) ([]string, error) {
	t, err := projections.GetInto[projections.AppTrader](ctx, h.d.Store, projections.CollAppTrader, a.AppID+"/"+trader)
	if errors.Is(err, projections.ErrNotFound) {
		return []string{}, nil
	}
	if t.Accounts == nil {
		t.Accounts = []string{}
	}
	return t.Accounts, err
}

// traderAccounts are the accounts the link's trader connected to the app before.
func (h *Handlers) traderAccounts(ctx context.Context, a projections.App, trader string) ([]projections.Account, error) {
	accts, err := projections.AccountsOf(ctx, h.d.Store, a.TenantID)
	if err != nil {
		return nil, err
	}
	out := []projections.Account{}
	for _, x := range accts {
		if x.AppID == a.AppID && x.Trader == trader {
			out = append(out, x)
		}
	}
	return out, nil
}

// whiteLabelID is the id and number of the app's white-label paper for a trader: one per trader.
func whiteLabelID(a projections.App, trader string) (id, number string) {
	ref := "connect:" + a.AppID + ":" + trader
	return firmcmd.AccountID(a.TenantID, ref), "WL" + firmcmd.AccountNumber(a.TenantID, ref)[2:]
}

// Session answers hosted Connect's page what it shows (GET
// /api/connect/hosted/session): who runs it, the link, the app, what the app
// may do (scopes), the providers to link, the trader's accounts already
// connected to the app, the trader's consent to live trading by the app on
// each of those at a provider (liveConsent), and the app's white-label
// paper.
func (h *Handlers) Session(w http.ResponseWriter, r *http.Request) error {
	l, a, err := h.frame(r)
	if err != nil {
		return err
	}
	accts, err := h.traderAccounts(r.Context(), a, l.Trader)
	if err != nil {
		return err
	}
	items := make([]account.Item, 0, len(accts))
	for _, x := range accts {
		items = append(items, account.ItemOf(x))
	}
	connected, err := h.granted(r.Context(), a, l.Trader)
	if err != nil {
		return err
	}
	consents, err := h.consents(r.Context(), accts) // hostedconsent.go
	if err != nil {
		return err
	}
	wl := a.Settings.WhiteLabel
	wlID, _ := whiteLabelID(a, l.Trader)
	opened := false
	for _, x := range accts {
		opened = opened || x.AccountID == wlID
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"link":        connectcmd.ViewLink(l, h.cfg.Now()),
		"operator":    h.operator(),
		"app":         map[string]any{"id": a.AppID, "name": a.Settings.Name, "logoUrl": logo(a.Settings.LogoURL)},
		"scopes":      scopes,
		"providers":   h.providers(),
		"accounts":    items,
		"connected":   connected,
		"liveConsent": consents,
		"whiteLabel":  map[string]any{"enabled": wl.Enabled, "label": wl.Label, "currency": wl.Currency, "startingBalance": wl.StartingBalance, "opened": opened},
	})
	return nil
}

// connectBody is the trader's choice: one of their accounts already
// connected to the app, or the app's white-label paper.
type connectBody struct {
	AccountID  string `json:"accountId"`
	WhiteLabel bool   `json:"whiteLabel"`
}

// Connect records the trader's choice on the link (POST
// /api/connect/hosted/connect): the link becomes connected with that
// account; opening the white-label paper issues it first (once per trader).
func (h *Handlers) Connect(w http.ResponseWriter, r *http.Request) error {
	var b connectBody
	if err := httpx.Decode(r, &b, 0); err != nil {
		return err
	}
	if (b.AccountID == "") == !b.WhiteLabel {
		return commands.BadRequest("choose one: accountId (an account you connected to this app before) or whiteLabel: true")
	}
	l, a, err := h.frame(r)
	if err != nil {
		return err
	}
	accountID := b.AccountID
	if b.WhiteLabel {
		wl := a.Settings.WhiteLabel
		if !wl.Enabled {
			return commands.InvalidField("whiteLabel", nil, "this app offers no white-label paper account")
		}
		id, number := whiteLabelID(a, l.Trader)
		open := &tenantcmd.OpenAccount{TenantID: a.TenantID, Broker: api.DefaultBroker, AccountNumber: number, Label: wl.Label,
			Currency: wl.Currency, StartingBalance: wl.StartingBalance, Kind: "demo", ReferenceID: "connect:" + a.AppID + ":" + l.Trader,
			AppID: a.AppID, Trader: l.Trader}
		res, err := h.d.Engine.Account(r.Context(), id, h.d.Engine.Envelope(hostedSystem, "", open))
		if err != nil {
			return err
		}
		if err := h.d.Settle(r.Context(), res); err != nil {
			return err
		}
		accountID = id
	} else {
		if err := commands.Key("accountId", b.AccountID, 64); err != nil {
			return err
		}
		x, err := projections.GetInto[projections.Account](r.Context(), h.d.Store, projections.CollAccount, b.AccountID)
		if errors.Is(err, projections.ErrNotFound) || (err == nil && (x.AppID != a.AppID || x.Trader != l.Trader)) {
			return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no account of yours connected to this app has that id")
		}
		if err != nil {
			return err
		}
	}
	return h.connect(w, r, l.ID, accountID)
}

// connect connects the link to accountID and answers {link}.
func (h *Handlers) connect(w http.ResponseWriter, r *http.Request, linkID, accountID string) error {
	res, err := h.d.Engine.Link(r.Context(), linkID, h.d.Engine.Envelope(hostedSystem, "", &connectcmd.ConnectLink{AccountID: accountID}))
	if err != nil {
		return err
	}
	if err := h.d.Settle(r.Context(), res); err != nil {
		return err
	}
	l, _, err := h.d.Engine.LinkState(r.Context(), linkID)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"link": connectcmd.ViewLink(l, h.cfg.Now())})
	return nil
}

// Disconnect ends the app's access to one of the trader's accounts (POST
// /api/connect/hosted/disconnect, {accountId}): every link of the trader that
// connected that account records the disconnect (the app reads it closed,
// result {status: disconnected, accountId}), and the app key acting for the
// trader is refused on it (403 app_disconnected) until a later link connects
// it again. On a provider account it ends the trader's consent to live
// trading by the app (hostedconsent.go): connecting the account again does
// not bring it back; linking it again with the box checked does.
// Disconnecting an account no longer connected changes nothing and answers
// the same.
func (h *Handlers) Disconnect(w http.ResponseWriter, r *http.Request) error {
	accountID, l, a, err := h.framedAccount(r)
	if err != nil {
		return err
	}
	// The disconnect ends the trader's consent to live trading by the app
	// on the account, first: should the links' disconnects not all land,
	// the app still trades nothing live there.
	res, err := h.d.Engine.WithdrawLiveConsent(r.Context(), hostedSystem, accountID, evacct.ConsentDisconnect)
	if err != nil {
		return err
	}
	if err := h.d.Settle(r.Context(), res); err != nil {
		return err
	}
	prefix := a.AppID + "/" + projections.TraderKey(l.Trader) + "/"
	var links []string
	err = h.d.Store.List(r.Context(), projections.CollTraderLink, projections.Query{Prefix: prefix}, func(_ string, get func(any) error) error {
		var id string
		if err := get(&id); err != nil {
			return err
		}
		links = append(links, id)
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range links {
		k, err := projections.GetInto[evconnect.Link](r.Context(), h.d.Store, projections.CollLink, id)
		if err != nil {
			return err
		}
		if k.State != evconnect.StateConnected || k.AccountID != accountID {
			continue
		}
		res, err := h.d.Engine.Link(r.Context(), id, h.d.Engine.Envelope(hostedSystem, "", &connectcmd.DisconnectLink{AccountID: accountID, By: "hosted"}))
		if err != nil {
			return err
		}
		if err := h.d.Settle(r.Context(), res); err != nil {
			return err
		}
	}
	connected, err := h.granted(r.Context(), a, l.Trader)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"accountId": accountID, "connected": connected})
	return nil
}

// consentWords are the words of a link form's box: the trader's consent
// to live trading by the app on the account linked (hostedconsent.go).
type consentWords struct{ App, Provider string }

func consentOf(app, provider string) consentWords { return consentWords{App: app, Provider: provider} }

// consentBox is a link form's box, unchecked until the trader checks it.
const consentBox = `{{define "consent"}}<label class="consent"><input type="checkbox" name="liveConsent">
<span>Allow live trading: {{.App}} may place real orders at {{.Provider}} on this account, with your money. Left unchecked, the
account is linked but {{.App}}'s orders on it are refused. You can stop it here at any time.</span></label>{{end}}`

var hostedPage = template.Must(template.New("hosted").Funcs(template.FuncMap{"consentOf": consentOf}).Parse(consentBox + `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Connect{{if .App}} to {{.App}}{{end}}</title>
<style nonce="{{.Nonce}}">
body{font:15px/1.4 system-ui,sans-serif;margin:0;padding:20px;color:#111;background:#fff}
h1{font-size:18px;margin:0 0 12px}h2{font-size:15px;margin:14px 0 6px}.logo{height:32px;margin-bottom:8px}
button{font:inherit;padding:8px 14px;margin:4px 0;border:1px solid #888;border-radius:6px;background:#f4f4f4;cursor:pointer;display:block;width:100%;text-align:left}
label{display:block;margin:6px 0}input{font:inherit;display:block;width:100%;box-sizing:border-box;padding:6px;margin-top:2px}
ul{margin:4px 0 8px;padding-left:20px}.provider{border:1px solid #ddd;border-radius:8px;padding:8px 12px;margin:8px 0}
.by,.note,.muted{color:#555;font-size:13px}label.consent{display:flex;gap:8px;align-items:flex-start;font-size:14px}
label.consent input{width:auto;margin:3px 0 0}.live{font-size:13px;margin:0 0 8px}.err{color:#a00}.ok{color:#060}button.cancel{background:#fff;text-align:center}
</style></head><body>
<p class="by" id="operator">Connect is run by <strong>{{.Operator}}</strong></p>
{{if .Error}}<h1>Connect</h1><p class="err" id="error">{{.Error}}</p>{{else}}
{{if .Logo}}<img class="logo" id="logo" src="{{.Logo}}" alt="" referrerpolicy="no-referrer">{{end}}
<h1 id="app-name">Connect an account to {{.App}}</h1>
<div id="main" data-frame="{{.Frame}}" data-link="{{.Link}}" data-words="{{.Words}}">
<section id="scopes"><h2>Once you connect an account, {{.App}} can:</h2>
<ul>{{range .Scopes}}<li>{{.}}</li>{{end}}</ul></section>
<p class="muted" id="status" role="status">Loading…</p>
<div id="picker" hidden>
<div id="accounts"></div>
{{range .Providers}}<form class="provider" data-provider="{{.Name}}" autocomplete="off">
<h2>Link your {{.Title}} account</h2><p class="note">{{.KeyNote}}</p>
{{if .Login}}<label>Login name<input name="login" autocomplete="username" spellcheck="false" autocapitalize="off" required maxlength="64"></label>
<label>Password<input name="password" type="password" autocomplete="current-password" required maxlength="256"></label>
<label>Environment<select name="environment"><option value="">The service's default</option><option value="live">Live</option><option value="demo">Demo</option></select></label>
<label>Account number (optional: only this account)<input name="accountNumber" autocomplete="off" spellcheck="false" autocapitalize="off" maxlength="64"></label>
{{template "consent" (consentOf $.App .Title)}}<button type="submit">Sign in to {{.Title}}</button></form>
{{else}}<label>API key<input name="apiKey" autocomplete="off" spellcheck="false" autocapitalize="off" required maxlength="256"></label>
<label>Secret key<input name="apiSecret" type="password" autocomplete="new-password" required maxlength="256"></label>
{{template "consent" (consentOf $.App .Title)}}<button type="submit">Link {{.Title}} account</button></form>{{end}}
{{end}}<div id="paper"></div>
<button type="button" class="cancel" id="cancel">Cancel and go back to {{.App}}</button>
</div></div>
<script nonce="{{.Nonce}}">
(function () {
  var main = document.getElementById('main'), frame = main.dataset.frame, link = main.dataset.link;
  var words = JSON.parse(main.dataset.words), picker = document.getElementById('picker');
  var status = document.getElementById('status');
  function show(text, cls) { status.textContent = text; status.className = cls || 'muted'; }
  function failed(e) { show(words[e.code] || words[''], 'err'); status.dataset.code = e.code || ''; }
  function call(method, path, body) {
    return fetch(path, {method: method, headers: {'Authorization': 'Frame ' + frame, 'Content-Type': 'application/json'},
      body: body ? JSON.stringify(body) : undefined}).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (j) {
        if (!r.ok) { var e = new Error('HTTP ' + r.status); e.code = j.code || ''; throw e; } return j; });
    }, function () { var e = new Error('network'); e.code = ''; throw e; });
  }
  function tell(l) { window.parent.postMessage({type: 'svc.connect', linkId: link, state: l.state, result: l.result}, '*'); }
  function ended(text, id, l) {
    picker.remove(); show(text, 'ok'); status.id = id;
    if (l.result && l.result.accountId) { status.dataset.account = l.result.accountId; }
    tell(l);
  }
  function done(j) { ended('Connected. You can go back to the app.', 'connected', j.link); }
  function choose(body) { show('Connecting…'); call('POST', '/api/connect/hosted/connect', body).then(done, failed); }
  document.getElementById('cancel').onclick = function () {
    show('Canceling…');
    call('POST', '/api/connect/hosted/cancel', {}).then(function (j) {
      if (j.link.state === 'connected') { done(j); return; }
      ended('Canceled. Nothing was connected. You can go back to the app.', 'canceled', j.link);
    }, failed);
  };
  Array.prototype.forEach.call(document.querySelectorAll('form.provider'), function (f) {
    f.onsubmit = function (ev) {
      ev.preventDefault();
      if (f.elements.login) {
        var name = f.elements.login.value.trim(), password = f.elements.password.value;
        var number = f.elements.accountNumber.value.trim(), body;
        f.elements.password.value = '';
        var loginFailed = function (e) { show(words['login:' + e.code] || words[e.code] || words[''], 'err'); status.dataset.code = e.code || ''; };
        if (!name || !password) { loginFailed({code: 'invalid_request'}); return; }
        body = {provider: f.dataset.provider, login: name, password: password, liveConsent: f.elements.liveConsent.checked};
        if (f.elements.environment.value) { body.environment = f.elements.environment.value; }
        if (number) { body.accountNumber = number; }
        show('Signing in to the provider…');
        call('POST', '/api/connect/hosted/providers', body).then(done, loginFailed);
        password = ''; body.password = '';
        return;
      }
      var key = f.elements.apiKey.value.trim(), secret = f.elements.apiSecret.value;
      f.elements.apiSecret.value = '';
      if (!key || !secret) { failed({code: 'invalid_request'}); return; }
      show('Checking your key with the exchange…');
      call('POST', '/api/connect/hosted/providers', {provider: f.dataset.provider, apiKey: key, apiSecret: secret,
        liveConsent: f.elements.liveConsent.checked}).then(done, failed);
      secret = '';
    };
  });
  call('GET', '/api/connect/hosted/session').then(function (s) {
    if (s.link.state === 'connected') { done(s); return; }
    picker.hidden = false;
    show(s.accounts.length ? 'Pick an account, link an exchange account, or open a paper account.' : 'Link an exchange account, or open a paper account.');
    s.accounts.forEach(function (a) {
      var b = document.createElement('button'); b.type = 'button'; b.className = 'account'; b.dataset.account = a.accountId;
      b.textContent = a.label + ' (' + a.accountNumber + ')'; b.onclick = function () { choose({accountId: a.accountId}); };
      document.getElementById('accounts').appendChild(b);
      if (s.connected.indexOf(a.accountId) < 0) { return; }
      var d = document.createElement('button'); d.type = 'button'; d.className = 'disconnect'; d.dataset.account = a.accountId;
      d.textContent = 'Disconnect ' + s.app.name + ' from ' + a.label + ' (' + a.accountNumber + ')';
      d.onclick = function () {
        show('Disconnecting…');
        call('POST', '/api/connect/hosted/disconnect', {accountId: a.accountId}).then(function () {
          d.remove(); show(s.app.name + ' no longer acts on ' + a.label + ' (' + a.accountNumber + ').', 'ok');
          Array.prototype.forEach.call(document.querySelectorAll('p.live[data-account="' + a.accountId + '"]'), function (x) { x.remove(); });
          status.dataset.disconnected = a.accountId;
        }, failed);
      };
      document.getElementById('accounts').appendChild(d);
      var c = null;
      s.liveConsent.forEach(function (x) { if (x.accountId === a.accountId) { c = x; } });
      if (!c) { return; }
      var name = a.label + ' (' + a.accountNumber + ')', p = document.createElement('p');
      p.className = 'live'; p.dataset.account = a.accountId; p.dataset.granted = c.granted ? 'yes' : 'no';
      var off = function () {
        p.dataset.granted = 'no';
        p.textContent = 'Live trading by ' + s.app.name + ' is off on ' + name + ': its orders there are refused. ' +
          'To allow it, link this account again below with "Allow live trading" checked.';
      };
      if (!c.granted) { off(); document.getElementById('accounts').appendChild(p); return; }
      p.textContent = s.app.name + ' may trade live on ' + name + ': its orders are real orders at the exchange, on your money. ';
      var w = document.createElement('button'); w.type = 'button'; w.className = 'withdraw'; w.dataset.account = a.accountId;
      w.textContent = 'Stop live trading by ' + s.app.name + ' on ' + name;
      w.onclick = function () {
        show('Stopping live trading…');
        call('POST', '/api/connect/hosted/live-consent/withdraw', {accountId: a.accountId}).then(function () {
          w.remove(); off(); show(s.app.name + ' can no longer trade live on ' + name + '.', 'ok');
          status.dataset.withdrawn = a.accountId;
        }, failed);
      };
      p.appendChild(w);
      document.getElementById('accounts').appendChild(p);
    });
    if (s.whiteLabel.enabled && !s.whiteLabel.opened) {
      var p = document.createElement('button'); p.type = 'button'; p.id = 'open-paper';
      p.textContent = 'Open a ' + s.whiteLabel.label + ' account (' + s.whiteLabel.startingBalance + ' ' + s.whiteLabel.currency + ')';
      p.onclick = function () { choose({whiteLabel: true}); };
      document.getElementById('paper').appendChild(p);
    }
  }, failed);
})();
</script>{{end}}
</body></html>
`))
