package jepsen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/cluster"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/mail"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/seal"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/sim/binance"
)

// Provider accounts under the harness's faults: traders whose linked
// Binance futures accounts (the repository's simulator, sim/binance) the
// engines speak to. The simulator runs in the test's own process on the
// bridge's root address (Net.ClientIP), which every namespace reaches, so
// a partition cuts an engine from the NATS majority while it still reaches
// the exchange: the case where two nodes may believe they own an account.
// The clients place small market orders, each with a fresh clientOrderId
// (an unknown outcome sent again at once through the other node, twice at
// most); after healing, every order whose outcome is still unknown is sent
// again with its clientOrderId until an answer settles it, and the
// exchange's own count of each clientOrderId is checked against what the
// engine answered (CheckProvider).

// ProviderSim is the simulator of a run, served through a recorder that
// notes every order request (POST /fapi/v1/order): when, from which host,
// its newClientOrderId, the age of its signed timestamp and the answer.
type ProviderSim struct {
	Sim *binance.Sim

	net  *Net
	srv  *http.Server
	mu   sync.Mutex
	reqs []ExchangeRequest
}

// ExchangeRequest is one order request as it reached the exchange.
type ExchangeRequest struct {
	At         time.Time
	From       string // the host it came from (n1, n2), else its address
	ClientID   string // newClientOrderId
	Age        time.Duration
	RecvWindow string
	Status     int
	Answer     string
}

func (r ExchangeRequest) String() string {
	return fmt.Sprintf("%s from %s: %s signed %v before it arrived (recvWindow %q), answered %d %.160s",
		r.At.Format("15:04:05.000000"), r.From, r.ClientID, r.Age.Round(time.Millisecond), r.RecvWindow, r.Status, r.Answer)
}

// NetEnv starts the simulator on n's root address and answers the engine
// settings that make the engines trade there (Options.NetEnv).
func (p *ProviderSim) NetEnv(n *Net) (map[string]string, error) {
	p.net = n
	p.Sim = binance.New(binance.Options{})
	ln, err := net.Listen("tcp", n.ClientIP()+":0")
	if err != nil {
		return nil, err
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	p.Sim.SetBaseURL("http://" + ln.Addr().String())
	if err := p.Sim.SetPrice("BTCUSDT", "60000"); err != nil {
		return nil, err
	}
	keys, err := seal.NewKeySetting("k1")
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"ENGINE_BINANCE_REST_URL": p.Sim.URL(), "ENGINE_BINANCE_WS_URL": p.Sim.WSURL(), "ENGINE_BINANCE_SPOT_URL": p.Sim.URL(),
		"ENGINE_PROVIDER_ALLOW_PRIVATE": "1", "ENGINE_SEAL_KEYS": keys,
	}, nil
}

// statusRecorder keeps an answer's status and the start of its body.
type statusRecorder struct {
	http.ResponseWriter
	status int
	body   []byte
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if len(r.body) < 300 {
		r.body = append(r.body, b[:min(len(b), 300-len(r.body))]...)
	}
	return r.ResponseWriter.Write(b)
}

func (p *ProviderSim) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/fapi/v1/order" {
		p.Sim.ServeHTTP(w, r) // the streams hijack w: passed as it is
		return
	}
	at := time.Now()
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	params := r.URL.Query()
	if form, err := url.ParseQuery(string(body)); err == nil {
		for k, v := range form {
			params[k] = v
		}
	}
	rec := &statusRecorder{ResponseWriter: w}
	p.Sim.ServeHTTP(rec, r)
	req := ExchangeRequest{At: at, From: r.RemoteAddr, ClientID: params.Get("newClientOrderId"), RecvWindow: params.Get("recvWindow"),
		Status: rec.status, Answer: string(rec.body)}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		req.From = host
		for _, h := range p.net.hosts {
			if h.IP == host {
				req.From = h.Name
			}
		}
	}
	if ms, err := strconv.ParseInt(params.Get("timestamp"), 10, 64); err == nil {
		req.Age = at.Sub(time.UnixMilli(ms))
	}
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
}

// Requests are the order requests that reached the exchange with
// newClientOrderId id.
func (p *ProviderSim) Requests(id string) []ExchangeRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []ExchangeRequest
	for _, r := range p.reqs {
		if r.ClientID == id {
			out = append(out, r)
		}
	}
	return out
}

// From counts the order requests that reached the exchange by the host
// they came from.
func (p *ProviderSim) From() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, r := range p.reqs {
		out[r.From]++
	}
	return out
}

// Late are the order requests that reached the exchange more than d after
// their signed timestamp.
func (p *ProviderSim) Late(d time.Duration) []ExchangeRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []ExchangeRequest
	for _, r := range p.reqs {
		if r.Age > d {
			out = append(out, r)
		}
	}
	return out
}

// Close stops the simulator.
func (p *ProviderSim) Close() {
	if p.srv != nil {
		_ = p.srv.Close()
	}
	if p.Sim != nil {
		_ = p.Sim.Close()
	}
}

// Trader is a person signed up through the engine with one linked
// simulator account.
type Trader struct {
	Email     string
	Key       string // the Trading API key
	APIKey    string // at the simulator
	Secret    string
	AccountID string
	Number    string
}

func (tr Trader) query() string { return "?broker=binance&account=" + tr.Number }

// ExchangeID is the clientOrderId the exchange holds for coid.
func (tr Trader) ExchangeID(coid string) string { return provider.ClientOrderID(tr.AccountID, coid) }

// browser is a session with one node: its cookie, the node's address as
// every request's Origin.
type browser struct {
	c      *Cluster
	base   string
	cookie string
	cl     *http.Client
}

func (b *browser) do(method, path string, body any) (int, map[string]any, error) {
	j, _ := json.Marshal(body)
	req, err := http.NewRequest(method, b.base+path, bytes.NewReader(j))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", b.base)
	if b.cookie != "" {
		req.AddCookie(&http.Cookie{Name: b.c.Creds.SessionCookieName, Value: b.cookie})
	}
	resp, err := b.cl.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == b.c.Creds.SessionCookieName {
			b.cookie = ck.Value
		}
	}
	var m map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &m)
	if m == nil {
		m = map[string]any{"body": string(raw)}
	}
	return resp.StatusCode, m, nil
}

// SignUpTrader signs a trader up through n1 (the mail with the token lands
// in n1's data directory), verifies, signs in, issues a Trading API key,
// adds apiKey to the simulator and links it, retrying a 503 (a lease
// moving) for 30 s.
func SignUpTrader(c *Cluster, sim *binance.Sim, email, apiKey, secret string) (Trader, error) {
	tr := Trader{Email: email, APIKey: apiKey, Secret: secret}
	if err := sim.AddAccount(binance.Account{APIKey: apiKey, Secret: secret}); err != nil {
		return tr, err
	}
	b := &browser{c: c, base: c.EngineURL(0), cl: &http.Client{Timeout: 10 * time.Second}}
	const password = "a jepsen password"
	expect := func(what string, want int, method, path string, body any) (map[string]any, error) {
		var m map[string]any
		err := waitFor(30*time.Second, func() error {
			st, got, err := b.do(method, path, body)
			if err != nil {
				return err
			}
			m = got
			if st == http.StatusServiceUnavailable {
				return fmt.Errorf("%s: %d %v", what, st, got)
			}
			if st != want {
				return fmt.Errorf("%s: %d %v", what, st, got)
			}
			return nil
		})
		return m, err
	}
	if _, err := expect("signup", http.StatusCreated, "POST", "/api/auth/signup", map[string]string{"email": email, "password": password}); err != nil {
		return tr, err
	}
	msg, _, err := mail.Latest(filepath.Join(c.dir, engineName(0), "mail"), email)
	if err != nil {
		return tr, err
	}
	token, _ := mail.Token(msg.Text)
	if _, err := expect("verify", http.StatusOK, "POST", "/api/auth/verify", map[string]string{"token": token, "password": password}); err != nil {
		return tr, err
	}
	if _, err := expect("login", http.StatusOK, "POST", "/api/auth/login", map[string]string{"email": email, "password": password}); err != nil {
		return tr, err
	}
	m, err := expect("key", http.StatusCreated, "POST", "/api/keys", map[string]string{"name": "jepsen"})
	if err != nil {
		return tr, err
	}
	tr.Key, _ = m["secret"].(string)
	m, err = expect("link", http.StatusCreated, "POST", "/api/account/providers",
		map[string]any{"provider": "binance-futures", "apiKey": apiKey, "apiSecret": secret})
	if err != nil {
		return tr, err
	}
	acct, _ := m["account"].(map[string]any)
	tr.AccountID, _ = acct["accountId"].(string)
	tr.Number, _ = acct["accountNumber"].(string)
	if tr.Key == "" || tr.AccountID == "" || tr.Number == "" {
		return tr, fmt.Errorf("signup of %s: key %q, account %v", email, tr.Key, acct)
	}
	return tr, nil
}

// Owner is the index of the engine that owns accountID while every engine
// is live (the cluster's rendezvous placement).
func (c *Cluster) Owner(accountID string) int {
	var live []string
	for i := range c.Engines {
		live = append(live, engineName(i))
	}
	o := cluster.Rendezvous(cluster.Partition(accountID, cluster.DefaultPartitions), live)
	for i, n := range live {
		if n == o {
			return i
		}
	}
	return -1
}

// Owned is engine i's engine_cluster_partitions_owned, -1 when unread.
func (c *Cluster) Owned(i int) int {
	cl := &http.Client{Timeout: time.Second}
	resp, err := cl.Get(c.EngineURL(i) + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "engine_cluster_partitions_owned") {
			f := strings.Fields(l)
			if n, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				return int(n)
			}
		}
	}
	return -1
}

// WaitOwned waits until every engine owns the partitions the rendezvous
// placement gives it with every engine live.
func (c *Cluster) WaitOwned(d time.Duration) error {
	var live []string
	for i := range c.Engines {
		live = append(live, engineName(i))
	}
	want := map[string]int{}
	for p := range cluster.DefaultPartitions {
		want[cluster.Rendezvous(p, live)]++
	}
	return waitFor(d, func() error {
		for i, n := range live {
			if got := c.Owned(i); got != want[n] {
				return fmt.Errorf("%s owns %d partitions, want %d", n, got, want[n])
			}
		}
		return nil
	})
}

// WaitListed waits until engine i lists the trader's account to its key.
func (c *Cluster) WaitListed(i int, tr Trader, d time.Duration) error {
	cl := &http.Client{Timeout: 2 * time.Second}
	return waitFor(d, func() error {
		code, b, _, err := call(cl, c.EngineURL(i), tr.Key, http.MethodGet, "/api/account/list", nil, nil)
		if err != nil {
			return err
		}
		if code != http.StatusOK || !bytes.Contains(b, []byte(tr.AccountID)) {
			return fmt.Errorf("n%d does not list %s: %d %.200s", i+1, tr.AccountID, code, b)
		}
		return nil
	})
}

// The classes of a provider order's answer.
const (
	POK          = "ok"          // 200: placed
	PDup         = "dup"         // 409 idempotency_conflict naming the order: placed by an earlier try
	PUnavailable = "unavailable" // a retry-safe 503 (provider_unavailable, owner_unavailable ...): nothing was placed
	PRefused     = "refused"     // a 4xx: refused, nothing placed
	PUnsent      = "unsent"      // the connection was never made
	PUnknown     = "unknown"     // 503 outcome_unknown, another 5xx, a timeout, a cut answer
)

// PAttempt is one request of a provider order, as the client saw it.
type PAttempt struct {
	Phase  string // "run" (under the faults) or "retry" (after healing)
	Client int
	Node   int
	Call   time.Duration // on the history's clock
	Return time.Duration
	Status int
	Code   string
	Err    string
	Class  string
	// BrokerOrderID is the order a 200 answered or a 409 named.
	BrokerOrderID string
}

func (a PAttempt) String() string {
	s := fmt.Sprintf("%s n%d %v..%v: %s", a.Phase, a.Node+1, a.Call.Round(time.Millisecond), a.Return.Round(time.Millisecond), a.Class)
	if a.Status != 0 {
		s += fmt.Sprintf(" %d", a.Status)
	}
	if a.Code != "" {
		s += " " + a.Code
	}
	if a.BrokerOrderID != "" {
		s += " " + a.BrokerOrderID
	}
	if a.Err != "" {
		s += fmt.Sprintf(" (%.160s)", a.Err)
	}
	return s
}

// POrder is one clientOrderId of one trader and every attempt of it.
type POrder struct {
	Trader   int
	COID     string
	Body     map[string]any
	Attempts []PAttempt
	// AtHeal and Final are the exchange's counts of its clientOrderId
	// after the faults were healed (before any retry) and at the very end.
	AtHeal, Final int
}

// First is the answer of the attempt under the faults.
func (o *POrder) First() PAttempt { return o.Attempts[0] }

// Last is the last attempt.
func (o *POrder) Last() PAttempt { return o.Attempts[len(o.Attempts)-1] }

// has reports whether an attempt answered class.
func (o *POrder) has(class string) bool {
	for _, a := range o.Attempts {
		if a.Class == class {
			return true
		}
	}
	return false
}

// definite reports whether an attempt answered what the order became:
// placed (200, 409 naming it) or refused (a 4xx).
func (o *POrder) definite() bool { return o.has(POK) || o.has(PDup) || o.has(PRefused) }

// History is every attempt, one a line.
func (o *POrder) History() string {
	var b strings.Builder
	for _, a := range o.Attempts {
		b.WriteString("\n    " + a.String())
	}
	return b.String()
}

// ProviderWorkload is the clients of the provider run: market orders of
// 0.002 BTCUSDT (120 USDT at 60000, above the exchange's 100 USDT minimum
// notional), either side, each with a fresh clientOrderId, through a random
// engine; an unknown outcome is sent again at once through the other
// engine, twice at most while the clients run (Retry settles the rest).
type ProviderWorkload struct {
	C       *Cluster
	H       *History
	Traders []Trader
	Clients int
	Seed    uint64
	Timeout time.Duration // each request's

	cl     *http.Client
	mu     sync.Mutex
	orders []*POrder
}

func (w *ProviderWorkload) init() {
	if w.cl == nil {
		w.cl = &http.Client{Timeout: w.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 16,
			DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}}
	}
}

// Orders are the orders sent so far.
func (w *ProviderWorkload) Orders() []*POrder {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*POrder(nil), w.orders...)
}

// Run runs the clients until ctx ends and the requests in flight answer.
func (w *ProviderWorkload) Run(ctx context.Context) {
	w.init()
	var wg sync.WaitGroup
	for id := range w.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(w.Seed, uint64(id)+100))
			for n := 0; ctx.Err() == nil; n++ {
				t := rng.IntN(len(w.Traders))
				side := "buy"
				if rng.IntN(2) == 0 {
					side = "sell"
				}
				o := &POrder{Trader: t, COID: fmt.Sprintf("p%d-%d", id, n), Body: map[string]any{
					"instrument": "BTCUSDT", "side": side, "orderType": "market", "quantity": "0.002"}}
				o.Body["clientOrderId"] = o.COID
				w.mu.Lock()
				w.orders = append(w.orders, o)
				w.mu.Unlock()
				// An unknown outcome is sent again at once through the
				// other node, twice at most while the faults hold: a node
				// that took the account over must settle what the old
				// owner may still send.
				node := rng.IntN(len(w.C.Engines))
				for try := 0; ; try++ {
					a := w.send(o, id, node, "run")
					w.mu.Lock()
					o.Attempts = append(o.Attempts, a)
					w.mu.Unlock()
					if a.Class != PUnknown || try == 2 || ctx.Err() != nil {
						break
					}
					node = (node + 1) % len(w.C.Engines)
					time.Sleep(100 * time.Millisecond)
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(20+rng.IntN(60)) * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
}

// send sends o once through node and judges the answer.
func (w *ProviderWorkload) send(o *POrder, client, node int, phase string) PAttempt {
	tr := w.Traders[o.Trader]
	a := PAttempt{Phase: phase, Client: client, Node: node, Call: w.H.Now()}
	code, b, _, err := call(w.cl, w.C.EngineURL(node), tr.Key, http.MethodPost, "/api/trading/order"+tr.query(), o.Body, nil)
	a.Return = w.H.Now()
	a.Status = code
	judgeProvider(&a, o.COID, code, b, err)
	return a
}

// judgeProvider reads an answer to an order on a provider account.
func judgeProvider(a *PAttempt, coid string, code int, body []byte, err error) {
	if err != nil {
		a.Err = err.Error()
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			a.Class = PUnsent
		} else {
			a.Class = PUnknown
		}
		return
	}
	var m struct {
		Code  string `json:"code"`
		Error string `json:"error"`
		Order struct {
			ClientOrderID string `json:"clientOrderId"`
			BrokerOrderID string `json:"brokerOrderId"`
		} `json:"order"`
		Params map[string]any `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	if code != http.StatusOK {
		a.Code = m.Code
		if m.Code == "" || code >= 400 && !commands.RetrySafe(commands.Code(m.Code)) {
			a.Err = fmt.Sprintf("%.300s", body)
		}
	}
	switch {
	case code == http.StatusOK && m.Order.ClientOrderID == coid:
		a.Class, a.BrokerOrderID = POK, m.Order.BrokerOrderID
	case code == http.StatusAccepted && m.Code == string(commands.CodeWriteRecorded):
		a.Class, a.BrokerOrderID = POK, m.Order.BrokerOrderID // done, the read models are behind
	case code == http.StatusOK:
		a.Class, a.Err = PUnknown, fmt.Sprintf("200 naming another order: %.300s", body)
	case code == http.StatusConflict && m.Code == string(commands.CodeIdempotencyConflict):
		a.Class = PDup
		a.BrokerOrderID, _ = m.Params["brokerOrderId"].(string)
	case code == http.StatusServiceUnavailable && m.Code != "" && commands.RetrySafe(commands.Code(m.Code)):
		a.Class = PUnavailable
	case code >= 500:
		a.Class = PUnknown
	default:
		a.Class = PRefused
	}
}

// Retry sends every order whose attempt under the faults had an unknown
// outcome again with its clientOrderId, through the engines in turn, until
// an answer settles it (200, 409 naming it, a 4xx) or d passes.
func (w *ProviderWorkload) Retry(d time.Duration) {
	w.init()
	deadline := time.Now().Add(d)
	var todo []*POrder
	for _, o := range w.Orders() {
		if o.has(PUnknown) && !o.definite() {
			todo = append(todo, o)
		}
	}
	work := make(chan *POrder)
	var wg sync.WaitGroup
	for id := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				for try := 0; ; try++ {
					a := w.send(o, 100+id, (o.Last().Node+1+try)%len(w.C.Engines), "retry")
					w.mu.Lock()
					o.Attempts = append(o.Attempts, a)
					w.mu.Unlock()
					if a.Class == POK || a.Class == PDup || a.Class == PRefused || time.Now().After(deadline) {
						break
					}
					time.Sleep(500 * time.Millisecond)
				}
			}
		}()
	}
	for _, o := range todo {
		work <- o
	}
	close(work)
	wg.Wait()
}

// Count reads the exchange's count of every order's clientOrderId into
// AtHeal (final false) or Final.
func (w *ProviderWorkload) Count(sim *binance.Sim, final bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range w.orders {
		tr := w.Traders[o.Trader]
		n := sim.OrdersByClientID(tr.APIKey, tr.ExchangeID(o.COID))
		if final {
			o.Final = n
		} else {
			o.AtHeal = n
		}
	}
}

// PViolation is an order whose answers the exchange contradicts.
type PViolation struct {
	Order *POrder
	Trader
	Why string
}

func (v PViolation) String() string {
	return fmt.Sprintf("%s/%s (exchange id %s): %s; at the exchange %d after healing, %d at the end; attempts:%s",
		v.Number, v.Order.COID, v.ExchangeID(v.Order.COID), v.Why, v.Order.AtHeal, v.Order.Final, v.Order.History())
}

// CheckProvider judges every order by its Final count at the exchange:
// never more than once; once when an attempt answered 200 or 409 naming
// it; never when every attempt answered that nothing was placed (a
// retry-safe 503 such as provider_unavailable, a 4xx, no connection) —
// such an order is never sent again; and when an attempt's outcome was
// unknown, 0 or 1 times as the definite answer of a later attempt says (an
// unknown still unsettled after the retries is a violation too: the healed
// deployment did not answer it).
func (w *ProviderWorkload) CheckProvider() []PViolation {
	var out []PViolation
	for _, o := range w.Orders() {
		v := func(why string, args ...any) {
			out = append(out, PViolation{Order: o, Trader: w.Traders[o.Trader], Why: fmt.Sprintf(why, args...)})
		}
		switch {
		case o.Final > 1:
			v("placed %d times at the exchange", o.Final)
		case o.has(POK) || o.has(PDup):
			if o.Final != 1 {
				v("answered placed (200 or 409 naming it), yet at the exchange %d times", o.Final)
			}
			if o.has(PRefused) {
				v("answered both placed and refused")
			}
		case !o.has(PUnknown):
			if o.Final != 0 || o.AtHeal != 0 {
				v("every attempt answered that nothing was placed, yet at the exchange (%d after healing, %d at the end)", o.AtHeal, o.Final)
			}
		case o.has(PRefused):
			if o.Final != 0 {
				v("a retry of an unknown outcome answered refused, yet at the exchange %d times", o.Final)
			}
		default:
			v("no definite answer to the retries after healing")
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Order.First().Call < out[j].Order.First().Call })
	return out
}

// ProviderSummary counts the attempts under the faults by class and code,
// the orders by how they ended, and the orders at the exchange.
func (w *ProviderWorkload) ProviderSummary() string {
	orders := w.Orders()
	classes, codes, retried := map[string]int{}, map[string]int{}, map[string]int{}
	unknownAtHeal, attempts, retries, atExchange, unknowns := map[int]int{}, 0, 0, 0, 0
	for _, o := range orders {
		for _, a := range o.Attempts {
			if a.Phase != "run" {
				retries++
				continue
			}
			attempts++
			classes[a.Class]++
			if a.Code != "" {
				codes[fmt.Sprintf("%d %s", a.Status, a.Code)]++
			} else if a.Status != 0 && a.Status != http.StatusOK {
				codes[strconv.Itoa(a.Status)]++
			}
		}
		if o.has(PUnknown) {
			unknowns++
			unknownAtHeal[o.AtHeal]++
			retried[o.Last().Class]++
		}
		atExchange += o.Final
	}
	return fmt.Sprintf("%d orders, %d attempts under the faults: ok %d, dup %d, unavailable %d, refused %d, unsent %d, unknown %d; codes %v; "+
		"%d orders with an unknown outcome, at the exchange after healing (count: orders) %v, %d retries after healing, their last answers %v; "+
		"%d orders at the exchange in all",
		len(orders), attempts, classes[POK], classes[PDup], classes[PUnavailable], classes[PRefused], classes[PUnsent], classes[PUnknown], codes,
		unknowns, unknownAtHeal, retries, retried, atExchange)
}

// Refusals are the attempts under the faults answered with a 4xx, by
// account and code: how many, the first and the last, and the first's
// answer.
func (w *ProviderWorkload) Refusals() string {
	type stat struct {
		n           int
		first, last time.Duration
		body        string
	}
	by := map[string]*stat{}
	var keys []string
	for _, o := range w.Orders() {
		for _, a := range o.Attempts {
			if a.Phase != "run" || a.Class != PRefused {
				continue
			}
			k := fmt.Sprintf("%s %d %s", w.Traders[o.Trader].Number, a.Status, a.Code)
			st := by[k]
			if st == nil {
				st = &stat{first: a.Call, body: a.Err}
				by[k] = st
				keys = append(keys, k)
			}
			st.n++
			if a.Call < st.first {
				st.first, st.body = a.Call, a.Err
			}
			st.last = max(st.last, a.Call)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		st := by[k]
		fmt.Fprintf(&b, "%s: %d, %v..%v; the first: %.300s\n", k, st.n, st.first.Round(time.Millisecond), st.last.Round(time.Millisecond), st.body)
	}
	return strings.TrimRight(b.String(), "\n")
}

// WindowSummary is, per fault, the attempts invoked while it held, by
// class and the node they went through.
func (w *ProviderWorkload) WindowSummary(windows []Window) string {
	var b strings.Builder
	for _, win := range windows {
		classes := map[string]int{}
		for _, o := range w.Orders() {
			for _, a := range o.Attempts {
				if a.Phase == "run" && a.Call >= win.Start && a.Call <= win.End {
					classes[fmt.Sprintf("%s via n%d", a.Class, a.Node+1)]++
				}
			}
		}
		fmt.Fprintf(&b, "%s (%v..%v): %v\n", win.Fault, win.Start.Round(time.Millisecond), win.End.Round(time.Millisecond), classes)
	}
	return strings.TrimRight(b.String(), "\n")
}

// PlacedBy is, per fault and trader, the 200s (orders placed) answered
// while the fault held, by the node that answered them, with the first
// call and last answer: an account whose orders both nodes placed while a
// split held had two nodes acting as its owner.
func (w *ProviderWorkload) PlacedBy(windows []Window) string {
	type span struct {
		n           int
		first, last time.Duration
	}
	var b strings.Builder
	for _, win := range windows {
		for ti, tr := range w.Traders {
			by := map[int]*span{}
			for _, o := range w.Orders() {
				if o.Trader != ti {
					continue
				}
				for _, a := range o.Attempts {
					if a.Phase != "run" || a.Class != POK || a.Call < win.Start || a.Call > win.End {
						continue
					}
					sp := by[a.Node]
					if sp == nil {
						sp = &span{first: a.Call}
						by[a.Node] = sp
					}
					sp.n++
					sp.first, sp.last = min(sp.first, a.Call), max(sp.last, a.Return)
				}
			}
			if len(by) == 0 {
				continue
			}
			fmt.Fprintf(&b, "%s, trader %d (%s, owner n%d):", win.Fault, ti+1, tr.Number, w.C.Owner(tr.AccountID)+1)
			for node := range w.C.Engines {
				if sp := by[node]; sp != nil {
					fmt.Fprintf(&b, " via n%d %d placed %v..%v;", node+1, sp.n, sp.first.Round(time.Millisecond), sp.last.Round(time.Millisecond))
				}
			}
			if len(by) > 1 {
				b.WriteString(" both nodes")
			}
			b.WriteString("\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// LogFacts is what the log holds of the traders' accounts: per trader and
// clientOrderId ("trader/coid", trader counted from 0) the place intents
// recorded, and the holds the engine's reconciliation placed, with their
// reasons and when.
type LogFacts struct {
	Intents map[string]int
	Holds   []string
	// Filled is, by "trader/coid", the quantity the log's fills of the
	// order add up to; Orphan, by trader, the fills of orders the log names
	// no clientOrderId of.
	Filled map[string]events.Decimal
	Orphan map[int]events.Decimal
}

// ReadLog reads the traders' accounts from the deployment's log.
func (w *ProviderWorkload) ReadLog(ctx context.Context) (*LogFacts, error) {
	l, err := w.C.OpenLog(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	reg := engine.Registry()
	f := &LogFacts{Intents: map[string]int{}, Filled: map[string]events.Decimal{}, Orphan: map[int]events.Decimal{}}
	for ti, tr := range w.Traders {
		coid := map[string]string{} // brokerOrderId -> clientOrderId
		_, err := l.Load(ctx, events.Subject(events.KindAccount, tr.AccountID), func(m eventlog.Msg) error {
			c, err := reg.Decode(m.Data)
			if err != nil {
				return fmt.Errorf("commit %d: %w", m.Seq, err)
			}
			for _, e := range c.Events {
				switch e := e.(type) {
				case evacct.OrderIntended:
					if e.Op == evacct.IntentPlace {
						f.Intents[fmt.Sprintf("%d/%s", ti, e.Order.ClientOrderID)]++
					}
					coid[e.Order.BrokerOrderID] = e.Order.ClientOrderID
				case evacct.OrderPlaced:
					coid[e.Order.BrokerOrderID] = e.Order.ClientOrderID
				case evacct.OrderFilled:
					if id, ok := coid[e.BrokerOrderID]; ok && id != "" {
						k := fmt.Sprintf("%d/%s", ti, id)
						f.Filled[k] = f.Filled[k].Add(e.Quantity)
					} else {
						f.Orphan[ti] = f.Orphan[ti].Add(e.Quantity)
					}
				case evacct.ReconciliationHeld:
					f.Holds = append(f.Holds, fmt.Sprintf("%s (trader %d) held at commit %d, %s, by %s: %s",
						tr.Number, ti+1, m.Seq, e.At.Format("15:04:05.000"), e.By, e.Reason))
				case evacct.ReconciliationReleased:
					f.Holds = append(f.Holds, fmt.Sprintf("%s (trader %d) released at commit %d", tr.Number, ti+1, m.Seq))
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", tr.Number, err)
		}
	}
	return f, nil
}
