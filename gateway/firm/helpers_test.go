package firm_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/auth"
)

const trustedOrigin = "https://ops.example.test"

// firm is a test service seen from the demo firm's side.
type firm struct {
	*apptest.Env
	partnerKey string
	cookie     string
	venue      string
}

type options struct {
	dataDir  string
	receiver *receiver // a TLS server whose certificate the engine trusts
	backoff  []time.Duration
	timeout  time.Duration
	now      func() time.Time
	postgres bool // read models in PostgreSQL (DATABASE_URL)
	// public keeps the egress rules on (WebhookAllowPrivate off): the
	// receiver on 127.0.0.1 is then out of reach.
	public bool
	// transport, when set, makes the webhook deliveries (with private
	// addresses allowed: egress keeps a transport it cannot guard only then).
	transport http.RoundTripper
}

func start(t *testing.T, o options) *firm {
	t.Helper()
	e := apptest.Start(t, apptest.Options{DataDir: o.dataDir, ManualFeed: true, Now: o.now, Postgres: o.postgres, Configure: func(c *app.Config) {
		c.AllowedOrigins = trustedOrigin
		if o.receiver != nil {
			pool := x509.NewCertPool()
			pool.AddCert(o.receiver.srv.Certificate())
			c.Firm.WebhookClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		}
		c.Firm.WebhookBackoff = o.backoff
		c.Firm.WebhookTimeout = o.timeout
		c.Firm.WebhookAllowPrivate = !o.public
		if o.transport != nil {
			c.Firm.WebhookClient = &http.Client{Transport: o.transport}
		}
	}})
	return wrap(e)
}

func wrap(e *apptest.Env) *firm {
	return &firm{Env: e, partnerKey: e.Creds["partnerKey"].(string), cookie: e.Creds["operatorSession"].(string), venue: e.Creds["venueId"].(string)}
}

func (f *firm) restart(t *testing.T) *firm {
	t.Helper()
	return wrap(f.Env.Restart())
}

// partner sends a request with the partner key.
func (f *firm) partner(method, path string, body any) *apptest.Resp {
	f.T.Helper()
	return f.Do(apptest.Req{Method: method, Path: path, Body: body, Key: f.partnerKey})
}

// operator sends a request with the operator session cookie.
func (f *firm) operator(method, path string, origin string) *apptest.Resp {
	f.T.Helper()
	h := map[string]string{"Cookie": "svc_session=" + f.cookie}
	if origin != "" {
		h["Origin"] = origin
	}
	return f.Do(apptest.Req{Method: method, Path: path, Key: "-", Headers: h})
}

// provision creates one evaluation account and returns its number.
func (f *firm) provision(ref string, start string) string {
	f.T.Helper()
	r := f.partner(http.MethodPost, "/api/partner/accounts", map[string]any{"accounts": []map[string]any{
		{"referenceId": ref, "email": ref + "@trader.example", "startingBalance": start}}})
	want(f.T, r, http.StatusOK)
	res := r.Map(f.T)["results"].([]any)[0].(map[string]any)
	if res["status"] != "created" && res["status"] != "existing" {
		f.T.Fatalf("provision %s: %v", ref, res)
	}
	return res["account"].(map[string]any)["accountNumber"].(string)
}

// tradingKey issues a Trading API key to the demo firm, to trade its accounts.
func (f *firm) tradingKey() string {
	f.T.Helper()
	key := auth.NewKey("svc_sk_")
	eng := f.App.Engine
	res, err := eng.Tenant(context.Background(), app.DemoFirm, eng.Envelope(events.Principal{System: "test"}, "",
		&tenantcmd.IssueKey{KeyID: ulid.Make().String(), Digest: auth.Digest(key), Kind: "trading", Prefix: key[:11]}))
	if err != nil {
		f.T.Fatal(err)
	}
	if err := f.App.Deps.Settle(context.Background(), res); err != nil {
		f.T.Fatal(err)
	}
	return key
}

func (f *firm) balanceOp(ref, number, op, amount string) *apptest.Resp {
	f.T.Helper()
	return f.partner(http.MethodPost, "/api/partner/balance-op", map[string]any{"referenceId": ref, "accountNumber": number, "op": op, "amount": amount})
}

func (f *firm) balance(number string) string {
	f.T.Helper()
	r := f.partner(http.MethodGet, "/api/partner/accounts", nil)
	want(f.T, r, http.StatusOK)
	for _, a := range r.Map(f.T)["accounts"].([]any) {
		m := a.(map[string]any)
		if m["accountNumber"] == number {
			return m["balance"].(string)
		}
	}
	f.T.Fatalf("account %s not listed", number)
	return ""
}

func want(t testing.TB, r *apptest.Resp, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
}

func wantCode(t testing.TB, r *apptest.Resp, status int, code string) map[string]any {
	t.Helper()
	want(t, r, status)
	m := r.Map(t)
	if m["code"] != code {
		t.Fatalf("code %v, want %s: %s", m["code"], code, r.Body)
	}
	return m
}

func params(m map[string]any) string { return fmt.Sprint(m["params"]) }

// clock is the engine's clock in a test: real time plus an offset the test moves.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }
