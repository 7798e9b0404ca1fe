package tradovate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/svc/engine/sim/tradovate"
)

const (
	password   = "correct horse"
	demoLogin  = "demo-trader"
	liveLogin  = "live-trader" // market data for ES, NQ and ZN
	plainLogin = "plain-trader"
	demoAcct   = "DEMO1001"
	liveAcct   = "LIVE2001"
	plainAcct  = "LIVE3001"
)

// clock is a settable clock for the simulator.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// start is the simulated time of every test: a Wednesday afternoon, ESZ6 the front month.
var start = time.Date(2026, 11, 4, 15, 0, 0, 0, time.UTC)

// env is a simulator under test with its three logins and clock.
type env struct {
	t     *testing.T
	sim   *tradovate.Sim
	clock *clock
	ids   map[string]int64 // account name → id
}

func newEnv(t *testing.T, opts tradovate.Options) *env {
	t.Helper()
	c := &clock{t: start}
	if opts.Now == nil {
		opts.Now = c.Now
	}
	if opts.ClientSilence == 0 {
		opts.ClientSilence = -1
	}
	sim, err := tradovate.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	sim.SetBaseURL(srv.URL)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		_ = sim.Close()
		srv.Close()
	})
	e := &env{t: t, sim: sim, clock: c, ids: map[string]int64{}}
	for _, l := range []tradovate.Login{
		{Name: demoLogin, Password: password, Kind: "demo", Accounts: []tradovate.AccountSpec{{Name: demoAcct}}},
		{Name: liveLogin, Password: password, Kind: "live", MarketData: []string{"ES", "NQ", "ZN"},
			Accounts: []tradovate.AccountSpec{{Name: liveAcct, Balance: "100000"}}},
		{Name: plainLogin, Password: password, Kind: "live", Accounts: []tradovate.AccountSpec{{Name: plainAcct}}},
	} {
		_, accts, err := sim.AddLogin(l)
		if err != nil {
			t.Fatal(err)
		}
		for n, id := range accts {
			e.ids[n] = id
		}
	}
	return e
}

// call sends one REST request (POST with a JSON body when body is not nil, else GET) and returns the
// status and the body.
func (e *env) call(token, endpoint string, body any) (int, []byte) {
	e.t.Helper()
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		method, rd = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.sim.URL()+"/"+endpoint, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s: %v", endpoint, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// ok sends a request that must answer 200 and decodes its JSON.
func (e *env) ok(token, endpoint string, body any) map[string]any {
	e.t.Helper()
	st, b := e.call(token, endpoint, body)
	if st != http.StatusOK {
		e.t.Fatalf("%s: %d %s", endpoint, st, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("%s: %v: %s", endpoint, err, b)
	}
	return m
}

func (e *env) list(token, endpoint string) []map[string]any {
	e.t.Helper()
	st, b := e.call(token, endpoint, nil)
	if st != http.StatusOK {
		e.t.Fatalf("%s: %d %s", endpoint, st, b)
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		e.t.Fatalf("%s: %v: %s", endpoint, err, b)
	}
	return out
}

// login requests an access token and returns the whole answer.
func (e *env) login(name string) map[string]any {
	e.t.Helper()
	ans := e.ok("", "auth/accesstokenrequest", map[string]any{"name": name, "password": password,
		"appId": "engine-test", "appVersion": "1.0", "cid": 8, "sec": "test-sec", "deviceId": "test-device"})
	if ans["accessToken"] == nil {
		e.t.Fatalf("no token: %v", ans)
	}
	return ans
}

func (e *env) token(name string) string { return e.login(name)["accessToken"].(string) }

// place places an order with placeorder's body fields and returns the answer.
func (e *env) place(token string, fields map[string]any) map[string]any {
	e.t.Helper()
	return e.ok(token, "order/placeorder", fields)
}

func (e *env) orderStatus(token string, id any) string {
	e.t.Helper()
	o := e.ok(token, "order/item?id="+idText(id), nil)
	return o["ordStatus"].(string)
}

func idText(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case json.Number:
		return x.String()
	}
	return ""
}

// num reads a JSON number field as its exact text.
func numText(t *testing.T, b []byte, path ...string) string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, _ := strconv.Atoi(p)
			if i >= len(x) {
				t.Fatalf("no %s in %s", strings.Join(path, "."), b)
			}
			v = x[i]
		}
	}
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%s is %T (%v) in %s", strings.Join(path, "."), v, v, b)
	}
	return n.String()
}

// sock is a test client of one of the simulator's sockets: it records every frame it reads.
type sock struct {
	t      *testing.T
	c      *websocket.Conn
	mu     sync.Mutex
	frames []string
	closed chan struct{}
	err    error
	nextID int64
}

func dial(t *testing.T, url string) *sock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &sock{t: t, c: c, closed: make(chan struct{}), nextID: 1}
	go func() {
		defer close(s.closed)
		for {
			_, msg, err := c.Read(context.Background())
			if err != nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
				return
			}
			s.mu.Lock()
			s.frames = append(s.frames, string(msg))
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = c.CloseNow() })
	s.waitFrame(func(f string) bool { return f == "o" })
	return s
}

func (s *sock) snapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.frames...)
}

func (s *sock) write(text string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.c.Write(ctx, websocket.MessageText, []byte(text)); err != nil {
		s.t.Fatal(err)
	}
}

// waitFrame waits for a frame matching f and returns it.
func (s *sock) waitFrame(f func(string) bool) string {
	s.t.Helper()
	var got string
	waitFor(s.t, 5*time.Second, func() bool {
		for _, fr := range s.snapshot() {
			if f(fr) {
				got = fr
				return true
			}
		}
		return false
	})
	return got
}

// msg is one message of an 'a' frame: a response (s, i, d) or an event (e, d).
type msg struct {
	S int             `json:"s"`
	I int64           `json:"i"`
	E string          `json:"e"`
	D json.RawMessage `json:"d"`
}

// messages decodes every message of every 'a' frame read so far.
func (s *sock) messages() []msg {
	var out []msg
	for _, fr := range s.snapshot() {
		if !strings.HasPrefix(fr, "a") {
			continue
		}
		var ms []msg
		if err := json.Unmarshal([]byte(fr[1:]), &ms); err != nil {
			s.t.Fatalf("frame %q: %v", fr, err)
		}
		out = append(out, ms...)
	}
	return out
}

// request sends endpoint with body (a JSON value, or a string sent as is) and waits for its response.
func (s *sock) request(endpoint, query string, body any) msg {
	s.t.Helper()
	id := s.nextID
	s.nextID++
	text := ""
	switch b := body.(type) {
	case nil:
	case string:
		text = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		text = string(raw)
	}
	s.write(endpoint + "\n" + strconv.FormatInt(id, 10) + "\n" + query + "\n" + text)
	var got msg
	waitFor(s.t, 5*time.Second, func() bool {
		for _, m := range s.messages() {
			if m.E == "" && m.I == id && m.S != 0 {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// props are the props events read so far.
type propsEvent struct {
	EntityType string          `json:"entityType"`
	EventType  string          `json:"eventType"`
	Entity     json.RawMessage `json:"entity"`
}

func (s *sock) props() []propsEvent {
	var out []propsEvent
	for _, m := range s.messages() {
		if m.E != "props" {
			continue
		}
		var p propsEvent
		if err := json.Unmarshal(m.D, &p); err != nil {
			s.t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// userSocket dials the user data socket, authorizes it and syncs, returning the socket and the
// sync response.
func (e *env) userSocket(token string) (*sock, msg) {
	e.t.Helper()
	s := dial(e.t, e.sim.WSURL())
	if r := s.request("authorize", "", token); r.S != 200 {
		e.t.Fatalf("authorize: %+v", r)
	}
	r := s.request("user/syncrequest", "", map[string]any{"users": []int64{}})
	if r.S != 200 {
		e.t.Fatalf("syncrequest: %+v %s", r, r.D)
	}
	return s, r
}

func TestNewRefusesBadProducts(t *testing.T) {
	_, err := tradovate.New(tradovate.Options{Products: []tradovate.Product{{Name: "es", TickSize: "0", Price: "1.3",
		ValuePerPoint: "50", PriceFormatType: "Octal", Months: "HQW", Schedule: "weekly"}}})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"upper-case", "tickSize", "priceFormatType", "'W' is not a month code", "schedule"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestAddLoginRefusesMarketDataOnDemo(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	_, _, err := e.sim.AddLogin(tradovate.Login{Name: "d2", Password: "x", Kind: "demo", MarketData: []string{"ES"}})
	if err == nil || !strings.Contains(err.Error(), "demo login carries no market data") {
		t.Fatalf("err = %v", err)
	}
	_, _, err = e.sim.AddLogin(tradovate.Login{Name: "dup", Password: "x", Kind: "live",
		Accounts: []tradovate.AccountSpec{{Name: "NEW1"}, {Name: demoAcct}}})
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("duplicate account name: %v", err)
	}
	if ans := e.ok("", "auth/accesstokenrequest", map[string]any{"name": "dup", "password": "x"}); ans["accessToken"] != nil {
		t.Fatal("a refused login was half created")
	}
	if s := (tradovate.Login{Name: "n", Password: "secret-pw", Kind: "live"}).String(); strings.Contains(s, "secret-pw") {
		t.Fatalf("String shows the password: %s", s)
	}
}
