// Package identity serves people and their credentials: sign-up, email
// verification, sign-in sessions, password resets, and the Trading API keys
// and demo accounts a verified user makes for themselves. A user is a tenant
// of kind user; every change is a command on its aggregate.
package identity

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/account"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// Token lifetimes.
const (
	VerifyFor = 24 * time.Hour
	ResetFor  = time.Hour
)

// Mailer sends one plain-text mail.
type Mailer interface {
	Send(ctx context.Context, to, subject, text string) error
}

// Config is what the identity routes need beyond the shared dependencies.
type Config struct {
	Mail    Mailer
	BaseURL string // links in mails start here; the engine serves their pages (pages.go)
	Now     func() time.Time
	// Done ends the outbox's worker (outbox.go) when closed; nil: it runs
	// as long as the process.
	Done <-chan struct{}
}

// Handlers serve the identity routes; the route table is gateway/routes.go.
type Handlers struct {
	d       *api.Deps
	cfg     Config
	limits  *limiter
	sources *buckets // per client address (throttle.go)
	targets *buckets // per address mailed
	hashing hashGate
	outbox  chan job
}

// New makes the identity handlers and starts the outbox's worker.
func New(d *api.Deps, cfg Config) *Handlers {
	h := &Handlers{d: d, cfg: cfg, limits: newLimiter(), sources: newBuckets(SourceBurst, SourceEvery),
		targets: newBuckets(TargetBurst, TargetEvery), hashing: newHashGate(HashSlots(), HashWait), outbox: make(chan job, outboxSize)}
	go h.work(cfg.Done)
	return h
}

// hash is password's argon2id digest, computed in a slot of the hash gate.
func (h *Handlers) hash(ctx context.Context, password string) (string, error) {
	var digest string
	err := h.hashing.run(ctx, func() { digest = HashPassword(Argon2, password) })
	return digest, err
}

// userView is a user as the API answers it.
type userView struct {
	ID            string    `json:"id"`
	Email         string    `json:"email"`
	EmailVerified bool      `json:"emailVerified"`
	CreatedAt     time.Time `json:"createdAt"`
}

func view(u projections.User) userView {
	return userView{ID: u.UserID, Email: u.Email, EmailVerified: u.EmailVerified, CreatedAt: u.CreatedAt.UTC()}
}

type credentialsBody struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

func (b credentialsBody) check() error {
	if err := commandsEmail(b.Email); err != nil {
		return err
	}
	return tenantcmd.Password("password", b.Password)
}

var system = events.Principal{System: "identity"}

// exec runs cmd on the user's aggregate and waits for the read models.
// It answers how many events the command recorded (0: it changed nothing).
func (h *Handlers) exec(ctx context.Context, p events.Principal, userID string, cmd commands.Command) (int, error) {
	res, err := h.d.Engine.Tenant(ctx, userID, h.d.Engine.Envelope(p, "", cmd))
	if err != nil {
		return 0, err
	}
	return len(res.Events), h.d.Settle(ctx, res)
}

func (h *Handlers) user(ctx context.Context, userID string) (projections.User, error) {
	return projections.GetInto[projections.User](ctx, h.d.Store, projections.CollUser, userID)
}

func (h *Handlers) link(path, token string) string {
	return h.cfg.BaseURL + path + "?token=" + url.QueryEscape(token)
}

// mail sends a message; a failure is logged (without the body, which holds
// a token) and never changes the answer: the write stands.
func (h *Handlers) mail(ctx context.Context, to, subject, text string) {
	if h.cfg.Mail == nil {
		return
	}
	if err := h.cfg.Mail.Send(ctx, to, subject, text); err != nil {
		slog.Error("mail not sent", "subject", subject, "err", err)
	}
}

// Signup creates a user and mails a verification link. A second sign-up of
// an address answers the same way (201, an unverified user) and mails the
// owner instead, so the answer never tells whether the address has an account.
func (h *Handlers) Signup(w http.ResponseWriter, r *http.Request) error {
	var b credentialsBody
	if err := httpx.Decode(r, &b, 0); err != nil {
		return err
	}
	if err := b.check(); err != nil {
		return err
	}
	email := tenantcmd.NormalEmail(b.Email)
	if err := h.throttle(r, email); err != nil {
		return err
	}
	digest, err := h.hash(r.Context(), b.Password)
	if err != nil {
		return err
	}
	uid := tenantcmd.UserID(email)
	token := newToken(uid)
	now := h.cfg.Now().UTC()
	recorded, err := h.exec(r.Context(), system, uid, &tenantcmd.SignUp{Email: email, PasswordHash: digest,
		VerifyDigest: auth.Digest(token), VerifyUntil: now.Add(VerifyFor)})
	if err != nil {
		return err
	}
	u := userView{ID: uid, Email: email, CreatedAt: now}
	if recorded == 0 {
		h.mail(r.Context(), email, "You already have an account",
			"Someone, perhaps you, tried to sign up with this address, which already has an account.\n\n"+
				"Sign in instead, or reset your password: "+h.cfg.BaseURL+"/password-reset\n")
	} else {
		if got, err := h.user(r.Context(), uid); err == nil {
			u = view(got)
		}
		h.mail(r.Context(), email, "Verify your email address",
			"Welcome. Confirm this address within 24 hours by opening:\n\n"+h.link("/verify-email", token)+"\n\n"+
				"Or send the token with your password to POST /api/auth/verify.\n")
	}
	httpx.WriteJSON(w, http.StatusCreated, map[string]any{"user": u})
	return nil
}

type tokenBody struct {
	Token    string `json:"token"`
	Password string `json:"password,omitempty"`
}

func parseToken(tok string) (string, error) {
	uid, ok := tokenUser(tok)
	if !ok {
		return "", httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidToken, "the token is invalid, already used or expired; request a new one")
	}
	return uid, nil
}

// Verify spends a verification token: the user's email is verified.
func (h *Handlers) Verify(w http.ResponseWriter, r *http.Request) error {
	var b tokenBody
	if err := httpx.Decode(r, &b, 0); err != nil {
		return err
	}
	uid, err := parseToken(b.Token)
	if err != nil {
		return err
	}
	if err := h.confirmPassword(r, uid, b.Password); err != nil {
		return err
	}
	if _, err := h.exec(r.Context(), system, uid, &tenantcmd.VerifyEmail{Digest: auth.Digest(b.Token)}); err != nil {
		if isNotFound(err) {
			return invalidToken()
		}
		return err
	}
	u, err := h.user(r.Context(), uid)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"user": view(u)})
	return nil
}

// confirmPassword checks that whoever spends a verification link also knows
// the account's password: the link proves the mailbox, the password proves
// who made the account. Without it, someone who signed up first with another
// person's address (choosing the password) would own a verified account the
// moment that person clicked the mail, and with it every account issued to the
// address. A person who did not sign up resets the password first (which
// ends every session the account had), then verifies with the new one. A
// wrong password answers
// 401 invalid_credentials, spends nothing and counts as a failed sign-in.
func (h *Handlers) confirmPassword(r *http.Request, uid, password string) error {
	if password == "" {
		return &httpx.Error{Status: http.StatusBadRequest, Code: commands.CodeInvalidRequest, Params: map[string]any{"field": "password"},
			Msg: "password is required: the account's password confirms the address (one who does not know it resets it first)"}
	}
	if len(password) > tenantcmd.MaxPassword {
		return errCredentials
	}
	u, err := h.user(r.Context(), uid)
	if errors.Is(err, projections.ErrNotFound) {
		return invalidToken()
	}
	if err != nil {
		return err
	}
	addr, now := clientAddr(r), time.Now()
	if wait := h.limits.wait(now, pairName(u.Email, addr), addrName(addr)); wait > 0 {
		return &httpx.Error{Status: http.StatusTooManyRequests, Code: commands.CodeRateLimited, RetryAfter: int(wait.Seconds() + 1),
			Msg: "too many failed sign-ins; wait for Retry-After"}
	}
	var ok bool
	if err := h.hashing.run(r.Context(), func() { ok = u.PasswordHash != "" && CheckPassword(u.PasswordHash, password) }); err != nil {
		return err
	}
	if !ok {
		h.limits.fail(now, u.Email, addr)
		return errCredentials
	}
	return nil
}

// ResendVerification mails a new verification link to an unverified
// address; it answers 202 whatever the address, once the outbox has the
// job (outbox.go), so its time does not depend on the address either.
func (h *Handlers) ResendVerification(w http.ResponseWriter, r *http.Request) error {
	return h.queue(w, r, jobVerify)
}

// queue checks an email body and the throttles, queues a job of kind for
// the address and answers 202.
func (h *Handlers) queue(w http.ResponseWriter, r *http.Request, kind jobKind) error {
	email, err := decodeEmail(r)
	if err != nil {
		return err
	}
	email = tenantcmd.NormalEmail(email)
	if err := h.throttle(r, email); err != nil {
		return err
	}
	if err := h.enqueue(job{kind: kind, email: email, at: time.Now()}); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusAccepted, map[string]any{"status": "accepted"})
	return nil
}

// errCredentials is the one answer to a wrong email or a wrong password.
var errCredentials = httpx.Errorf(http.StatusUnauthorized, commands.CodeInvalidCredentials, "the email or the password is wrong")

// Login checks the password and starts a session: Set-Cookie svc_session.
// A wrong email and a wrong password answer alike, in about the same time;
// failures are rate limited per email and per client address.
func (h *Handlers) Login(w http.ResponseWriter, r *http.Request) error {
	return h.signIn(w, r, h.d.Auth.Sessions().Cookie)
}

// DashboardLogin signs in to the Connect dashboard (POST
// /api/connect/dashboard/login): the same credentials and limits as Login,
// a session of the dashboard's own audience in the svc_connect cookie, from
// the dashboard's origin only.
func (h *Handlers) DashboardLogin(w http.ResponseWriter, r *http.Request) error {
	if !h.d.Auth.DashboardOriginAllowed(r) {
		return httpx.Errorf(http.StatusForbidden, commands.CodeOriginNotAllowed, "sign in to the Connect dashboard from the dashboard's own origin")
	}
	return h.signIn(w, r, h.d.Auth.Sessions().DashboardCookie)
}

// DashboardLogout ends the dashboard session on the server and clears its cookie.
func (h *Handlers) DashboardLogout(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	if _, err := h.exec(r.Context(), p.Principal, p.UserID, &tenantcmd.EndSession{SessionID: p.Session, Reason: "logout"}); err != nil {
		return err
	}
	http.SetCookie(w, h.d.Auth.Sessions().ClearDashboardCookie())
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// DashboardMe answers the dashboard session's user.
func (h *Handlers) DashboardMe(w http.ResponseWriter, r *http.Request) error {
	_, u, err := h.d.Auth.DashboardUser(r)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"user": view(u)})
	return nil
}

// StartDashboard starts a dashboard session for a user (a sandbox's exchange
// of a statement) and sets its cookie.
func (h *Handlers) StartDashboard(w http.ResponseWriter, r *http.Request, uid string) error {
	return h.startSession(w, r, uid, h.d.Auth.Sessions().DashboardCookie)
}

// startSession records a new session of the user in the log and sets the cookie cookie makes of it.
func (h *Handlers) startSession(w http.ResponseWriter, r *http.Request, uid string, cookie func(auth.Claims) *http.Cookie) error {
	start := h.cfg.Now().UTC()
	c := auth.Claims{SessionID: "ses_" + ulid.Make().String(), UserID: uid, Start: start.Unix(), Seen: start.Unix(),
		Expires: start.Add(auth.SessionAbsolute).Unix()}
	if _, err := h.exec(r.Context(), system, uid, &tenantcmd.StartSession{SessionID: c.SessionID, Until: time.Unix(c.Expires, 0).UTC()}); err != nil {
		return err
	}
	http.SetCookie(w, cookie(c))
	return nil
}

// signIn checks the password and starts a session whose cookie cookie makes.
func (h *Handlers) signIn(w http.ResponseWriter, r *http.Request, cookie func(auth.Claims) *http.Cookie) error {
	var b credentialsBody
	if err := httpx.Decode(r, &b, 0); err != nil {
		return err
	}
	if err := commandsEmail(b.Email); err != nil {
		return err
	}
	if len(b.Password) > tenantcmd.MaxPassword {
		return errCredentials
	}
	email := tenantcmd.NormalEmail(b.Email)
	addr := clientAddr(r)
	now := time.Now()
	if wait := h.limits.wait(now, pairName(email, addr), addrName(addr)); wait > 0 {
		return &httpx.Error{Status: http.StatusTooManyRequests, Code: commands.CodeRateLimited, RetryAfter: int(wait.Seconds() + 1),
			Msg: "too many failed sign-ins; wait for Retry-After"}
	}
	uid := tenantcmd.UserID(email)
	u, err := h.user(r.Context(), uid)
	if err != nil && !errors.Is(err, projections.ErrNotFound) {
		return err
	}
	digest := u.PasswordHash
	if digest == "" {
		digest = dummyDigest
	}
	var ok bool
	if err := h.hashing.run(r.Context(), func() { ok = CheckPassword(digest, b.Password) }); err != nil {
		return err
	}
	if !ok || u.PasswordHash == "" {
		h.limits.fail(now, email, addr)
		return errCredentials
	}
	h.limits.succeed(email, addr)
	if err := h.startSession(w, r, uid, cookie); err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"user": view(u)})
	return nil
}

// Me answers the signed-in user.
func (h *Handlers) Me(w http.ResponseWriter, r *http.Request) error {
	_, u, err := h.d.Auth.SessionUser(r)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"user": view(u)})
	return nil
}

// Logout ends the session on the server (every node refuses it from the
// commit on) and clears the cookie.
func (h *Handlers) Logout(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	if _, err := h.exec(r.Context(), p.Principal, p.UserID, &tenantcmd.EndSession{SessionID: p.Session, Reason: "logout"}); err != nil {
		return err
	}
	http.SetCookie(w, h.d.Auth.Sessions().ClearCookie())
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// PasswordReset mails a reset link when the address has an account; the
// answer is 202 whatever the address, once the outbox has the job
// (outbox.go), so its time does not depend on the address either.
func (h *Handlers) PasswordReset(w http.ResponseWriter, r *http.Request) error {
	return h.queue(w, r, jobReset)
}

// PasswordResetConfirm spends a reset token: a new password, and every
// session of the user ends.
func (h *Handlers) PasswordResetConfirm(w http.ResponseWriter, r *http.Request) error {
	var b tokenBody
	if err := httpx.Decode(r, &b, 0); err != nil {
		return err
	}
	uid, err := parseToken(b.Token)
	if err != nil {
		return err
	}
	if err := tenantcmd.Password("password", b.Password); err != nil {
		return err
	}
	digest, err := h.hash(r.Context(), b.Password)
	if err != nil {
		return err
	}
	if _, err := h.exec(r.Context(), system, uid, &tenantcmd.ConfirmReset{Digest: auth.Digest(b.Token), PasswordHash: digest}); err != nil {
		if isNotFound(err) {
			return invalidToken()
		}
		return err
	}
	u, err := h.user(r.Context(), uid)
	if err != nil {
		return err
	}
	http.SetCookie(w, h.d.Auth.Sessions().ClearCookie())
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"user": view(u)})
	return nil
}

func invalidToken() error {
	return httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidToken, "the token is invalid, already used or expired; request a new one")
}

// isNotFound: the token named a user that does not exist.
func isNotFound(err error) bool {
	var ref *commands.Refusal
	return errors.As(err, &ref) && commands.StatusOf(ref.Code, ref.Malformed) == http.StatusNotFound
}

func commandsEmail(v string) error { return commands.Email("email", v) }

// decodeEmail reads a body of one email address.
func decodeEmail(r *http.Request) (string, error) {
	var b struct {
		Email string `json:"email"`
	}
	if err := httpx.Decode(r, &b, 0); err != nil {
		return "", err
	}
	return b.Email, commandsEmail(b.Email)
}

// keyView is a key as the API answers it; the secret is answered once, at issue.
type keyView struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"createdAt"`
	ExpiresAt  *time.Time `json:"expiresAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
}

func (h *Handlers) keyView(k projections.Key) keyView {
	v := keyView{ID: k.KeyID, Name: k.Name, Kind: k.Kind, Prefix: k.Prefix, CreatedAt: k.CreatedAt.UTC()}
	if !k.ExpiresAt.IsZero() {
		t := k.ExpiresAt.UTC()
		v.ExpiresAt = &t
	}
	if t, ok := h.d.Auth.LastUsed(k.Digest); ok {
		t = t.UTC()
		v.LastUsedAt = &t
	}
	return v
}

// IssueKey issues a Trading API key to the signed-in, verified user. The
// secret is in this answer only; the engine keeps its digest.
func (h *Handlers) IssueKey(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Name      string     `json:"name"`
		ExpiresAt *time.Time `json:"expiresAt"`
	}
	if err := httpx.Decode(r, &b, 0); err != nil {
		return err
	}
	if b.Name == "" {
		b.Name = "key"
	}
	p, _ := httpx.PrincipalOf(r)
	secret := auth.NewKey("svc_sk_")
	cmd := &tenantcmd.IssueKey{KeyID: "key_" + ulid.Make().String(), Digest: auth.Digest(secret), Kind: "trading",
		Prefix: secret[:11], Name: b.Name, ByUser: true}
	if b.ExpiresAt != nil {
		cmd.ExpiresAt = b.ExpiresAt.UTC()
	}
	if _, err := h.exec(r.Context(), p.Principal, p.UserID, cmd); err != nil {
		return err
	}
	k, err := projections.GetInto[projections.Key](r.Context(), h.d.Store, projections.CollKey, cmd.Digest)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusCreated, map[string]any{"key": h.keyView(k), "secret": secret})
	return nil
}

// ListKeys lists the user's live keys, newest last.
func (h *Handlers) ListKeys(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	digests, err := projections.ListInto[string](r.Context(), h.d.Store, projections.CollTenantKey, projections.Query{Prefix: p.UserID + "/"})
	if err != nil {
		return err
	}
	out := []keyView{}
	now := time.Now()
	for _, dg := range digests {
		k, err := projections.GetInto[projections.Key](r.Context(), h.d.Store, projections.CollKey, dg)
		if err != nil {
			return err
		}
		if k.Live(now) {
			out = append(out, h.keyView(k))
		}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"keys": out})
	return nil
}

// RevokeKey revokes one of the user's keys: the next request with it is 401.
func (h *Handlers) RevokeKey(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	id := mux.Vars(r)["id"]
	if len(id) > 64 {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no key of yours has that id")
	}
	if _, err := projections.GetInto[string](r.Context(), h.d.Store, projections.CollTenantKey, p.UserID+"/"+id); errors.Is(err, projections.ErrNotFound) {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no key of yours has that id")
	} else if err != nil {
		return err
	}
	if _, err := h.exec(r.Context(), p.Principal, p.UserID, &tenantcmd.RevokeKey{KeyID: id}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// DemoBalance is a demo account's starting balance.
var DemoBalance = events.Int(50000)

// OpenDemo opens a demo paper account for the caller: a verified user's
// session, or a Trading API key of that user.
func (h *Handlers) OpenDemo(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Currency string `json:"currency"`
	}
	if err := httpx.Decode(r, &b, 0); err != nil {
		return err
	}
	if b.Currency == "" {
		b.Currency = "USD"
	}
	if b.Currency != "USD" {
		return httpx.Errorf(http.StatusUnprocessableEntity, commands.CodeInvalidRequest, "demo accounts are issued in USD")
	}
	p, _ := httpx.PrincipalOf(r)
	// An Idempotency-Key names the account, so a retry opens none more.
	id, _, err := api.IdempotentID(r, "", p.TenantID, b)
	if err != nil {
		return err
	}
	id = strings.ToUpper(id)
	// The user's aggregate decides: a verified user, at most MaxDemoAccounts.
	if _, err := h.exec(r.Context(), p.Principal, p.TenantID, &tenantcmd.ReserveDemo{AccountID: "acct_" + id}); err != nil {
		return err
	}
	u, err := h.user(r.Context(), p.TenantID)
	if err != nil {
		return err
	}
	open := &tenantcmd.OpenAccount{TenantID: u.UserID, Broker: api.DefaultBroker, AccountNumber: "PD" + id[len(id)-12:],
		Label: "Demo " + id[len(id)-4:], Currency: b.Currency, StartingBalance: DemoBalance, Kind: "demo", Email: u.Email}
	if _, err := h.d.Exec(r, "acct_"+id, "", open); err != nil {
		return err
	}
	a, err := projections.GetInto[projections.Account](r.Context(), h.d.Store, projections.CollAccount, "acct_"+id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, map[string]any{"account": account.ItemOf(a)})
	return nil
}

// VerifiedUser finds or makes the verified user of email: a sandbox's
// Connect account, whose address production has verified (an exchanged
// statement says so). A new user gets a random password nobody knows: the
// dashboard is reached by exchanging statements, and a password reset gives
// the address's owner one.
func (h *Handlers) VerifiedUser(ctx context.Context, email string) (string, error) {
	email = tenantcmd.NormalEmail(email)
	uid := tenantcmd.UserID(email)
	u, err := h.user(ctx, uid)
	if errors.Is(err, projections.ErrNotFound) {
		digest, err := h.hash(ctx, auth.NewKey("pw_"))
		if err != nil {
			return "", err
		}
		if _, err := h.exec(ctx, system, uid, &tenantcmd.SignUp{Email: email, PasswordHash: digest,
			VerifyDigest: auth.Digest(auth.NewKey("unused_")), VerifyUntil: h.cfg.Now().UTC()}); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", err
	}
	if !u.EmailVerified {
		if _, err := h.exec(ctx, system, uid, &tenantcmd.MarkVerified{}); err != nil {
			return "", err
		}
	}
	return uid, nil
}
