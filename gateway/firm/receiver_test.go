package firm_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// receiver is a local TLS webhook endpoint. It verifies every delivery's
// signature with the secret of the endpoint it was registered as (by path),
// records what it saw, and answers each path with the status set for it.
type receiver struct {
	t       testing.TB
	srv     *httptest.Server
	mu      sync.Mutex
	secrets map[string]string // path -> signing secret
	status  map[string]int    // path -> status to answer (default 200)
	delay   map[string]time.Duration
	got     []delivery
	started map[string]int   // requests that arrived, answered or not, by path
	now     func() time.Time // the clock signatures are checked against
}

type delivery struct {
	Path     string
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Created  time.Time      `json:"createdAt"`
	Data     map[string]any `json:"data"`
	Received time.Time
}

func newReceiver(t testing.TB) *receiver {
	rc := &receiver{t: t, secrets: map[string]string{}, status: map[string]int{}, delay: map[string]time.Duration{}, now: time.Now, started: map[string]int{}}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) url(path string) string { return rc.srv.URL + path }

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	secret, status, delay := rc.secrets[r.URL.Path], rc.status[r.URL.Path], rc.delay[r.URL.Path]
	rc.started[r.URL.Path]++
	rc.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if err := verify(secret, r.Header.Get("svc-signature"), body, rc.now()); err != "" {
		rc.t.Errorf("delivery to %s: %s", r.URL.Path, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var d delivery
	if err := json.Unmarshal(body, &d); err != nil || d.ID == "" || d.Type == "" || d.Created.IsZero() || d.Data == nil {
		rc.t.Errorf("delivery body %s: %v", body, err)
	}
	d.Path, d.Received = r.URL.Path, time.Now()
	rc.mu.Lock()
	rc.got = append(rc.got, d)
	rc.mu.Unlock()
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
}

// verify checks a Stripe-style signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">.
func verify(secret, header string, body []byte, now time.Time) string {
	if secret == "" {
		return "no secret registered for the path"
	}
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return "malformed svc-signature " + header
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return "signature timestamp outside tolerance"
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	if !hmac.Equal([]byte(hex.EncodeToString(m.Sum(nil))), []byte(sig)) {
		return "signature does not verify"
	}
	return ""
}

func (rc *receiver) set(path, secret string, status int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secrets[path] = secret
	rc.status[path] = status
}

func (rc *receiver) deliveries(path string) []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []delivery
	for _, d := range rc.got {
		if d.Path == path {
			out = append(out, d)
		}
	}
	return out
}

// count counts the deliveries to path of event type typ ("" for any).
func (rc *receiver) count(path, typ string) int {
	n := 0
	for _, d := range rc.deliveries(path) {
		if typ == "" || d.Type == typ {
			n++
		}
	}
	return n
}

// client is an HTTP client that trusts the receiver's certificate.
func (rc *receiver) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(rc.srv.Certificate())
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 16}}
}
