// Package apptest starts the whole service in-process for integration tests:
// a real embedded JetStream in a temporary directory, the read models in memory
// or in PostgreSQL, the gateway behind an httptest server. Every response a
// test reads through Env.Do is validated against schema/openapi.yaml.
package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	validatorerrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/mail"
	"github.com/svc/engine/events"
	"github.com/svc/engine/schema"
)

// Options shape a test service.
type Options struct {
	DataDir      string           // reuse a data directory (restarts); default t.TempDir()
	Postgres     bool             // read models in PostgreSQL from DATABASE_URL (a fresh schema per call)
	DatabaseURL  string           // explicit database URL (with Postgres)
	Now          func() time.Time // injected clock
	ManualFeed   bool             // step the simulated feed by hand
	DemoAccounts int
	Configure    func(*app.Config)
}

// Env is a running test service.
type Env struct {
	T        testing.TB
	App      *app.App
	Server   *httptest.Server
	URL      string
	Key      string
	Creds    map[string]any
	Accounts []Account
	DataDir  string
	opts     Options
	lastDB   string
}

// Account is one demo account from dev-credentials.json.
type Account struct {
	Broker        string `json:"broker"`
	AccountNumber string `json:"accountNumber"`
	AccountID     string `json:"accountId"`
}

// Start starts a service for t and stops it at cleanup.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	if o.DemoAccounts == 0 {
		o.DemoAccounts = 1
	}
	// Market and news settings come from the test's environment (t.Setenv); nothing else does.
	cfg, err := app.ParseConfig(nil, func(k string) string {
		for _, p := range []string{"ENGINE_MARKET_", "ENGINE_NEWS_", "ENGINE_COINBASE_"} {
			if strings.HasPrefix(k, p) {
				return os.Getenv(k)
			}
		}
		return ""
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.DemoAccounts, cfg.RateLimit = o.DataDir, o.DemoAccounts, 0
	// The server listens before the service starts: its address is the
	// service's public base URL, the origin its pages' writes come from.
	srv := httptest.NewUnstartedServer(nil)
	cfg.BaseURL = "http://" + srv.Listener.Addr().String()
	if o.Postgres {
		cfg.DatabaseURL = o.DatabaseURL
		if cfg.DatabaseURL == "" {
			cfg.DatabaseURL = PostgresURL(t)
		}
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	a, err := app.Start(context.Background(), cfg, app.Options{Now: o.Now, ManualFeed: o.ManualFeed})
	if err != nil {
		srv.Listener.Close()
		t.Fatalf("start: %v", err)
	}
	srv.Config = app.NewServer(a.Handler) // the real server's timeouts and limits
	srv.Start()
	e := &Env{T: t, App: a, Server: srv, URL: srv.URL, DataDir: o.DataDir, opts: o, lastDB: cfg.DatabaseURL}
	t.Cleanup(e.Stop)
	b, err := os.ReadFile(filepath.Join(o.DataDir, "dev-credentials.json"))
	if errors.Is(err, os.ErrNotExist) && cfg.Env == "production" {
		return e // production makes no demo tenant
	}
	if err != nil {
		t.Fatalf("credentials: %v", err)
	}
	var creds struct {
		TradingKey string    `json:"tradingKey"`
		Accounts   []Account `json:"accounts"`
	}
	if err := json.Unmarshal(b, &creds); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(b, &e.Creds)
	e.Key, e.Accounts = creds.TradingKey, creds.Accounts
	return e
}

// Stop stops the service (idempotent).
func (e *Env) Stop() {
	if e.Server != nil {
		e.Server.CloseClientConnections()
		e.Server.Close()
		e.Server = nil
	}
	if e.App != nil {
		e.App.Close()
		e.App = nil
	}
}

// Restart stops the service and starts it again on the same data directory.
func (e *Env) Restart() *Env {
	e.Stop()
	o := e.opts
	o.DataDir = e.DataDir
	if o.Postgres && o.DatabaseURL == "" {
		o.DatabaseURL = e.App0URL()
	}
	return Start(e.T, o)
}

// App0URL is the database URL the service runs with ("" in memory).
func (e *Env) App0URL() string { return e.lastDB }

// Resp is a validated response.
type Resp struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test on error.
func (r *Resp) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// Map decodes the body as a JSON object.
func (r *Resp) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// Req is one request a test makes.
type Req struct {
	Method  string
	Path    string // with query
	Body    any    // marshalled to JSON unless a string or []byte
	Key     string // bearer key; "" uses the env's trading key; "-" sends none
	Headers map[string]string
}

// Do sends r and validates the response against the OpenAPI document.
func (e *Env) Do(r Req) *Resp {
	e.T.Helper()
	var body io.Reader
	switch b := r.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.T.Fatal(err)
		}
		body = bytes.NewReader(j)
	}
	req, err := http.NewRequest(r.Method, e.URL+r.Path, body)
	if err != nil {
		e.T.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch r.Key {
	case "":
		req.Header.Set("Authorization", "Bearer "+e.Key)
	case "-":
	default:
		req.Header.Set("Authorization", "Bearer "+r.Key)
	}
	for k, v := range r.Headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", r.Method, r.Path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := &Resp{Status: resp.StatusCode, Header: resp.Header, Body: b}
	ValidateResponse(e.T, req, resp.StatusCode, resp.Header, b)
	return out
}

// Get is Do with GET.
func (e *Env) Get(path string) *Resp {
	e.T.Helper()
	return e.Do(Req{Method: http.MethodGet, Path: path})
}

// Post is Do with POST and a JSON body.
func (e *Env) Post(path string, body any) *Resp {
	e.T.Helper()
	return e.Do(Req{Method: http.MethodPost, Path: path, Body: body})
}

var (
	specOnce sync.Once
	specVal  validator.Validator
	specErr  error
)

func specValidator() (validator.Validator, error) {
	specOnce.Do(func() {
		doc, err := libopenapi.NewDocument(schema.OpenAPI())
		if err != nil {
			specErr = err
			return
		}
		v, errs := validator.NewValidator(doc)
		if len(errs) > 0 {
			specErr = fmt.Errorf("openapi: %v", errs)
			return
		}
		specVal = v
	})
	return specVal, specErr
}

// ValidateResponse fails t when the response does not match the OpenAPI document.
// Event streams are checked for their status and content type only.
func ValidateResponse(t testing.TB, req *http.Request, status int, h http.Header, body []byte) {
	t.Helper()
	v, err := specValidator()
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	resp := &http.Response{StatusCode: status, Header: h.Clone(), Body: io.NopCloser(bytes.NewReader(body)), Request: req}
	if strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		resp.Body = io.NopCloser(strings.NewReader(""))
		resp.Header.Set("Content-Type", "text/event-stream")
	}
	vreq := req.Clone(context.Background())
	vreq.Body = http.NoBody
	ok, errs := v.ValidateHttpResponse(vreq, resp)
	if !ok && noSuchRoute(status, body, errs) {
		return
	}
	if !ok {
		var msgs []string
		for _, e := range errs {
			msg := e.Message + ": " + e.Reason
			for _, se := range e.SchemaValidationErrors {
				msg += " | " + se.FieldPath + " " + se.Reason
			}
			msgs = append(msgs, msg)
		}
		t.Errorf("response of %s %s (%d) does not match openapi.yaml: %s\nbody: %.600s", req.Method, req.URL.Path, status, strings.Join(msgs, "; "), body)
	}
}

// WaitFor polls fn until it returns nil and fails t with fn's last error once
// timeout has passed: enginetest.WaitFor, the one wait helper.
func WaitFor(t testing.TB, timeout time.Duration, fn func() error) {
	t.Helper()
	enginetest.WaitFor(t, timeout, fn)
}

// Commits reads the commits of one subject from the log, decoded, in order,
// for tests that check what a write recorded.
func (e *Env) Commits(subject string) []events.Commit {
	e.T.Helper()
	var out []events.Commit
	_, err := e.App.Log.Load(context.Background(), subject, func(m eventlog.Msg) error {
		c, err := engine.Registry().Decode(m.Data)
		if err != nil {
			return fmt.Errorf("%s at %d: %w", m.Subject, m.Seq, err)
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		e.T.Fatalf("commits of %s: %v", subject, err)
	}
	return out
}

// SignIn signs up a user with email, verifies it with the token of the mail
// the engine wrote, signs in and answers the session cookie's value.
func (e *Env) SignIn(email, password string) string {
	e.T.Helper()
	if r := e.Do(Req{Method: http.MethodPost, Path: "/api/auth/signup", Body: map[string]string{"email": email, "password": password}, Key: "-"}); r.Status != http.StatusCreated {
		e.T.Fatalf("signup %s: %d %s", email, r.Status, r.Body)
	}
	m, file, err := mail.Latest(filepath.Join(e.DataDir, "mail"), email)
	if err != nil {
		e.T.Fatalf("no mail to %s: %v", email, err)
	}
	tok, ok := mail.Token(m.Text)
	if !ok {
		e.T.Fatalf("mail %s carries no token", file)
	}
	if r := e.Do(Req{Method: http.MethodPost, Path: "/api/auth/verify", Body: map[string]string{"token": tok, "password": password}, Key: "-"}); r.Status != http.StatusOK {
		e.T.Fatalf("verify %s: %d %s", email, r.Status, r.Body)
	}
	r := e.Do(Req{Method: http.MethodPost, Path: "/api/auth/login", Body: map[string]string{"email": email, "password": password}, Key: "-"})
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == "svc_session" {
			return c.Value
		}
	}
	e.T.Fatalf("login %s: %d %s", email, r.Status, r.Body)
	return ""
}

// AsSession is Do with a session cookie and the engine's own Origin, no key.
func (e *Env) AsSession(cookie string, r Req) *Resp {
	e.T.Helper()
	r.Key = "-"
	h := map[string]string{"Cookie": "svc_session=" + cookie, "Origin": e.URL}
	for k, v := range r.Headers {
		h[k] = v
	}
	r.Headers = h
	return e.Do(r)
}

// noSuchRoute reports whether a response the document has no path for is
// the engine's answer to a path it serves no route at: 404 not_found in the
// error shape. Fuzzed path segments reach such paths.
func noSuchRoute(status int, body []byte, errs []*validatorerrors.ValidationError) bool {
	if status != http.StatusNotFound || len(errs) != 1 || !errs[0].IsPathMissingError() {
		return false
	}
	var e struct {
		Code, Error, RequestID string
	}
	return json.Unmarshal(body, &e) == nil && e.Code == string(commands.CodeNotFound) && e.Error != "" && e.RequestID != ""
}
