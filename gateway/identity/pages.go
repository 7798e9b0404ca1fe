package identity

import (
	"crypto/rand"
	"encoding/base64"
	"html/template"
	"net/http"
)

// The pages the links in the mails open (GET /verify-email?token= and GET
// /password-reset[?token=]): small first-party pages, with no third-party
// asset, whose own script (allowed by a nonce) POSTs the token to the API
// on the person's click. Opening a link spends nothing, so a mail scanner
// that fetches it consumes no token. The token stays off every other
// request (Referrer-Policy: no-referrer) and out of caches (no-store).

// pagePolicy is the pages' Content-Security-Policy: only their own script
// and style, requests to the engine itself, and no framing.
func pagePolicy(nonce string) string {
	return "default-src 'none'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
		"script-src 'nonce-" + nonce + "'; style-src 'nonce-" + nonce + "'"
}

// linkPage is what a page shows: which page, its token (or none) and the nonce of its script and style.
type linkPage struct {
	Verify bool
	Token  string
	Nonce  string
}

// VerifyPage serves the verification mail's link: a form that verifies
// the address with the link's token and the account's password (POST
// /api/auth/verify) and says how it went.
func (h *Handlers) VerifyPage(w http.ResponseWriter, r *http.Request) {
	servePage(w, r, linkPage{Verify: true})
}

// ResetPage serves the reset mail's link: a form for the new password that
// spends the link's token (POST /api/auth/password-reset/confirm); without
// a token, a form that asks for a reset link (POST /api/auth/password-reset).
func (h *Handlers) ResetPage(w http.ResponseWriter, r *http.Request) {
	servePage(w, r, linkPage{})
}

func servePage(w http.ResponseWriter, r *http.Request, p linkPage) {
	p.Token = r.URL.Query().Get("token")
	if _, ok := tokenUser(p.Token); !ok {
		p.Token = "" // a malformed token: the page says so, and offers what it can
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	p.Nonce = base64.RawURLEncoding.EncodeToString(b)
	hd := w.Header()
	hd.Set("Content-Security-Policy", pagePolicy(p.Nonce))
	hd.Set("Cache-Control", "no-store")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_ = linkPages.Execute(w, p)
}

var linkPages = template.Must(template.New("links").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{if .Verify}}Verify your email address{{else}}Reset your password{{end}}</title>
<style nonce="{{.Nonce}}">
body{font:15px/1.4 system-ui,sans-serif;max-width:420px;margin:40px auto;padding:0 20px;color:#111;background:#fff}
h1{font-size:20px;margin:0 0 16px}label{display:block;margin:12px 0 4px}
input{font:inherit;width:100%;box-sizing:border-box;padding:8px;border:1px solid #888;border-radius:6px}
button{font:inherit;margin-top:16px;padding:8px 14px;border:1px solid #888;border-radius:6px;background:#f4f4f4;cursor:pointer}
button[disabled]{opacity:.5;cursor:default}.err{color:#a00}.ok{color:#060}.muted{color:#666}
</style></head><body>
<main id="main" data-token="{{.Token}}">
{{if .Verify}}<h1>Verify your email address</h1>
{{if .Token}}<form id="verify" novalidate>
<p class="muted">Confirm that this address is yours with the password you chose when you signed up. Did not sign up, or forgot it? <a href="/password-reset">Reset the password</a> first, then open this link again.</p>
<label for="password">Your password</label>
<input id="password" name="password" type="password" autocomplete="current-password" maxlength="256" required>
<button id="confirm" type="submit">Verify my email address</button>
</form>
{{else}}<p class="err" id="error">This link is incomplete. Open the newest link we mailed you, or ask for a new one by signing in.</p>{{end}}
{{else}}<h1>Reset your password</h1>
{{if .Token}}<form id="reset" novalidate>
<label for="password">New password (at least 12 characters)</label>
<input id="password" name="password" type="password" autocomplete="new-password" minlength="12" maxlength="256" required>
<label for="again">The new password again</label>
<input id="again" name="again" type="password" autocomplete="new-password" minlength="12" maxlength="256" required>
<button id="save" type="submit">Set the new password</button>
</form>
{{else}}<p class="muted">Enter your account's email address; we mail it a link to choose a new password.</p>
<form id="request" novalidate>
<label for="email">Email address</label>
<input id="email" name="email" type="email" autocomplete="email" maxlength="254" required>
<button id="send" type="submit">Mail me a link</button>
</form>{{end}}
{{end}}
<p id="status" role="status"></p>
</main>
<script nonce="{{.Nonce}}">
(function () {
  var token = document.getElementById('main').dataset.token, status = document.getElementById('status');
  function show(id, text, cls) { status.id = id; status.textContent = text; status.className = cls; }
  function post(path, body, button) {
    if (button) { button.disabled = true; }
    show('status', 'Working…', 'muted');
    return fetch(path, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body), credentials: 'same-origin'})
      .then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (j) {
          if (!r.ok) { throw new Error(j.error || ('The request failed (HTTP ' + r.status + '). Try again in a moment.')); }
          return j;
        });
      })
      .catch(function (e) { if (button) { button.disabled = false; } show('error', e.message, 'err'); throw e; });
  }
  function on(id, ev, f) { var el = document.getElementById(id); if (el) { el.addEventListener(ev, f); } }
  on('verify', 'submit', function (ev) {
    ev.preventDefault();
    var f = ev.target, b = document.getElementById('confirm');
    post('/api/auth/verify', {token: token, password: document.getElementById('password').value}, b).then(function () {
      f.remove(); show('verified', 'Your email address is verified. You can close this page and sign in.', 'ok');
    }, function () {});
  });
  on('reset', 'submit', function (ev) {
    ev.preventDefault();
    var p = document.getElementById('password').value, a = document.getElementById('again').value;
    if (p !== a) { show('error', 'The two passwords differ.', 'err'); return; }
    if (p.length < 12) { show('error', 'The password needs at least 12 characters.', 'err'); return; }
    post('/api/auth/password-reset/confirm', {token: token, password: p}, document.getElementById('save')).then(function () {
      ev.target.remove(); show('done', 'Your password is changed, and every session signed out. Sign in with the new password.', 'ok');
    }, function () {});
  });
  on('request', 'submit', function (ev) {
    ev.preventDefault();
    post('/api/auth/password-reset', {email: document.getElementById('email').value}, document.getElementById('send')).then(function () {
      ev.target.remove(); show('sent', 'If the address has an account, a link is on its way. It works for an hour.', 'ok');
    }, function () {});
  });
})();
</script>
</body></html>
`))
