package jepsen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
)

// Account is one account the workload uses.
type Account struct {
	Number string
	ID     string
	Start  events.Decimal // the starting balance
}

// Workload is the clients: orders (limit orders that rest, market orders
// that fill), cancels and frame reads on the trading accounts; balance
// operations and receipt reads on the firm's accounts. A share of the
// clientOrderIds and referenceIds are shared: every client that draws one
// in the same 400 ms uses the same key (and body), through its own node.
// Each write is retried with its key as the spec's client rules say until
// an answer settles it.
type Workload struct {
	C       *Cluster
	H       *History
	Trade   []Account // the sandbox's demo accounts: orders
	Money   []Account // the firm's accounts: balance operations
	Clients int
	Seed    uint64
	// GiveUp is when a write still unsettled is left (its attempts stay in
	// the history; check.go reports it unsettled).
	GiveUp time.Time

	client *http.Client
	mu     sync.Mutex
	orders map[string][]string // account -> brokerOrderIds of limit orders answered
	refs   map[string][]string // account -> referenceIds sent
}

// Provision makes n firm accounts with a starting balance of 100 through
// the partner route, retrying through the engines until each is made.
func Provision(c *Cluster, n int) ([]Account, error) {
	cl := &http.Client{Timeout: 5 * time.Second}
	var out []Account
	for i := range n {
		body := map[string]any{"accounts": []any{map[string]any{"referenceId": fmt.Sprintf("jepsen-m%d", i+1),
			"email": fmt.Sprintf("money%d@example.com", i+1), "startingBalance": "100"}}}
		var a Account
		err := waitFor(30*time.Second, func() error {
			code, b, _, err := call(cl, c.EngineURL(i%len(c.Engines)), c.Creds.PartnerKey, http.MethodPost, "/api/partner/accounts", body, nil)
			if err != nil {
				return err
			}
			var res struct {
				Results []struct {
					Account *struct {
						AccountNumber string `json:"accountNumber"`
						AccountID     string `json:"accountId"`
					} `json:"account"`
				} `json:"results"`
			}
			if code != http.StatusOK || json.Unmarshal(b, &res) != nil || len(res.Results) != 1 || res.Results[0].Account == nil {
				return fmt.Errorf("provision: %d %s", code, b)
			}
			a = Account{Number: res.Results[0].Account.AccountNumber, ID: res.Results[0].Account.AccountID, Start: events.Int(100)}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Run runs the clients until ctx ends, then waits for the writes in flight
// (each until it settles or GiveUp passes).
func (w *Workload) Run(ctx context.Context) {
	w.client = &http.Client{Timeout: 4 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16,
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}}
	w.orders, w.refs = map[string][]string{}, map[string][]string{}
	var wg sync.WaitGroup
	for i := range w.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			(&client{w: w, id: i, node: i % len(w.C.Engines), rng: rand.New(rand.NewPCG(w.Seed, uint64(i)))}).run(ctx)
		}()
	}
	wg.Wait()
}

// client is one client's session: its node, the newest log sequence it saw
// (sent back as X-Engine-After), its own counters.
type client struct {
	w     *Workload
	id    int
	node  int
	rng   *rand.Rand
	seen  uint64
	n     int
	start time.Time
}

func (c *client) run(ctx context.Context) {
	c.start = time.Now()
	for ctx.Err() == nil {
		r := c.rng.IntN(100)
		switch {
		case r < 35:
			c.place()
		case r < 48:
			c.cancel()
		case r < 72:
			c.balance()
		case r < 90:
			c.read()
		default:
			c.receipt()
		}
		c.n++
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(20+c.rng.IntN(40)) * time.Millisecond):
		}
	}
}

// window is the shared keys' current window: clients drawing a shared key
// in the same window use the same one.
func (c *client) window() int { return int(time.Since(c.w.H.start) / (400 * time.Millisecond)) }

func hash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func (c *client) place() {
	a := c.w.Trade[c.rng.IntN(len(c.w.Trade))]
	var coid string
	if c.rng.IntN(100) < 40 {
		coid = fmt.Sprintf("s%d", c.window())
	} else {
		coid = fmt.Sprintf("c%d-%d", c.id, c.n)
	}
	typ, side := "limit", "buy"
	if h := hash(a.Number + coid); h%10 < 3 {
		typ = "market"
		if h%2 == 1 {
			side = "sell"
		}
	}
	body := map[string]any{"clientOrderId": coid, "instrument": "BTC-PERP", "side": side, "orderType": typ, "quantity": "0.01"}
	if typ == "limit" {
		body["limitPrice"], body["timeInForce"] = "1000", "gtc"
	}
	tmpl := Op{Account: a.Number, Kind: KindPlace, Key: coid, OrderType: typ}
	c.twice(strings.HasPrefix(coid, "s"), tmpl, func(c *client, node int, op *Op) {
		code, b, hdr, err := call(c.w.client, c.w.C.EngineURL(node), c.w.C.Creds.TradingKey, http.MethodPost,
			"/api/trading/order?account="+a.Number, body, nil)
		c.judge(op, code, b, hdr, err)
		switch op.Outcome {
		case OK:
			var ans struct {
				Order struct {
					BrokerOrderID string `json:"brokerOrderId"`
					State         string `json:"state"`
				} `json:"order"`
			}
			_ = json.Unmarshal(b, &ans)
			op.OrderID, op.State = ans.Order.BrokerOrderID, ans.Order.State
		case Dup:
			op.OrderID = paramOf(b, "brokerOrderId")
		}
		if typ == "limit" && op.OrderID != "" {
			c.w.mu.Lock()
			c.w.orders[a.Number] = append(c.w.orders[a.Number], op.OrderID)
			c.w.mu.Unlock()
		}
	})
}

func (c *client) cancel() {
	a := c.w.Trade[c.rng.IntN(len(c.w.Trade))]
	c.w.mu.Lock()
	ids := c.w.orders[a.Number]
	id := ""
	if len(ids) > 0 {
		id = ids[c.rng.IntN(len(ids))]
	}
	c.w.mu.Unlock()
	if id == "" {
		c.place()
		return
	}
	tmpl := Op{Account: a.Number, Kind: KindCancel, Key: id}
	c.write(tmpl, func(c *client, node int, op *Op) {
		code, b, hdr, err := call(c.w.client, c.w.C.EngineURL(node), c.w.C.Creds.TradingKey, http.MethodPost,
			"/api/trading/cancel?account="+a.Number, map[string]any{"brokerOrderId": id}, nil)
		c.judge(op, code, b, hdr, err)
	})
}

func (c *client) balance() {
	a := c.w.Money[c.rng.IntN(len(c.w.Money))]
	var ref string
	var h uint64
	if c.rng.IntN(100) < 40 {
		ref = fmt.Sprintf("s%d", c.window())
		h = hash(a.Number + ref)
	} else {
		ref = fmt.Sprintf("c%d-%d", c.id, c.n)
		h = c.rng.Uint64()
	}
	op, amount := "credit", int64(100+h%2900) // 1.00 to 29.99
	if h%3 == 0 {
		op = "debit"
	}
	if strings.HasPrefix(ref, "s") && c.rng.IntN(10) == 0 {
		amount++ // another body under a shared reference: 409 once the first is recorded
	}
	ref = a.Number + "-" + ref // references are the firm's, across its accounts
	c.w.mu.Lock()
	c.w.refs[a.Number] = append(c.w.refs[a.Number], ref)
	c.w.mu.Unlock()
	body := map[string]any{"referenceId": ref, "accountNumber": a.Number, "op": op, "amount": cents(amount)}
	tmpl := Op{Account: a.Number, Kind: KindBalance, Key: ref, BalOp: op, Cents: amount}
	c.twice(strings.HasPrefix(ref, a.Number+"-s"), tmpl, func(c *client, node int, o *Op) {
		code, b, hdr, err := call(c.w.client, c.w.C.EngineURL(node), c.w.C.Creds.PartnerKey, http.MethodPost,
			"/api/partner/balance-op", body, nil)
		c.judge(o, code, b, hdr, err)
	})
}

func (c *client) read() {
	a := c.w.Trade[c.rng.IntN(len(c.w.Trade))]
	op := &Op{Logical: c.w.H.NewLogical(), Client: c.id, Account: a.Number, Kind: KindRead, Node: c.node, After: c.seen}
	hdr := map[string]string{}
	if c.seen > 0 {
		hdr["X-Engine-After"] = strconv.FormatUint(c.seen, 10)
	}
	op.Call = c.w.H.Now()
	code, b, h, err := call(c.w.client, c.w.C.EngineURL(c.node), c.w.C.Creds.TradingKey, http.MethodGet,
		"/api/account/snapshot?account="+a.Number, nil, hdr)
	op.Return = c.w.H.Now()
	c.judge(op, code, b, h, err)
	if op.Outcome == OK {
		var f struct {
			Revision uint64 `json:"revision"`
			Summary  struct {
				Balance string `json:"balance"`
			} `json:"summary"`
			Orders []struct {
				ClientOrderID string `json:"clientOrderId"`
			} `json:"orders"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			op.Outcome, op.Err = Unknown, "unreadable frame: "+err.Error()
		} else {
			op.Revision, op.BalanceText = f.Revision, f.Summary.Balance
			op.Working = []string{}
			for _, o := range f.Orders {
				op.Working = append(op.Working, o.ClientOrderID)
			}
			c.saw(f.Revision)
		}
	} else {
		c.node = (c.node + 1) % len(c.w.C.Engines)
	}
	c.w.H.Add(op)
}

func (c *client) receipt() {
	a := c.w.Money[c.rng.IntN(len(c.w.Money))]
	c.w.mu.Lock()
	refs := c.w.refs[a.Number]
	ref := ""
	if len(refs) > 0 {
		ref = refs[c.rng.IntN(len(refs))]
	}
	c.w.mu.Unlock()
	if ref == "" {
		return
	}
	op := &Op{Logical: c.w.H.NewLogical(), Client: c.id, Account: a.Number, Kind: KindReceipt, Key: ref, Node: c.node, After: c.seen}
	hdr := map[string]string{"Cookie": c.w.C.Creds.SessionCookieName + "=" + c.w.C.Creds.OperatorSession}
	if c.seen > 0 {
		hdr["X-Engine-After"] = strconv.FormatUint(c.seen, 10)
	}
	op.Call = c.w.H.Now()
	code, b, h, err := call(c.w.client, c.w.C.EngineURL(c.node), "", http.MethodGet,
		"/api/operator/venues/"+c.w.C.Creds.VenueID+"/balance-ops/"+ref, nil, hdr)
	op.Return = c.w.H.Now()
	c.judge(op, code, b, h, err)
	switch {
	case op.Outcome == OK:
		var rc struct {
			Op     string         `json:"op"`
			Amount events.Decimal `json:"amount"`
		}
		if err := json.Unmarshal(b, &rc); err != nil {
			op.Outcome, op.Err = Unknown, "unreadable receipt: "+err.Error()
			break
		}
		op.Found, op.RecOp, op.RecCents = true, rc.Op, toCents(rc.Amount)
	case op.Outcome == Refused && code == http.StatusNotFound:
		op.Outcome = OK // a definite answer: no such operation
	default:
		c.node = (c.node + 1) % len(c.w.C.Engines)
	}
	c.w.H.Add(op)
}

// write runs one logical write: attempts through the client's node, then
// the next, with the same key, until an answer settles it (ok, dup or a
// refusal) or GiveUp passes. A retry-safe 503 waits its Retry-After (1 s);
// an unknown outcome is retried at once through the next node.
func (c *client) write(tmpl Op, send func(cl *client, node int, op *Op)) {
	logical := c.w.H.NewLogical()
	for try := 0; ; try++ {
		op := tmpl
		op.Logical, op.Try, op.Client, op.Node = logical, try, c.id, c.node
		op.Call = c.w.H.Now()
		send(c, c.node, &op)
		op.Return = c.w.H.Now()
		c.w.H.Add(&op)
		switch op.Outcome {
		case OK, Dup, Refused:
			return
		}
		if time.Now().After(c.w.GiveUp) {
			return
		}
		c.node = (c.node + 1) % len(c.w.C.Engines)
		wait := 100 * time.Millisecond
		if op.Outcome == Fail && op.Status == http.StatusServiceUnavailable {
			wait = time.Second // Retry-After: 1
		}
		time.Sleep(wait)
	}
}

// twice runs a write, and when shared is set, half the time the same write
// at the same moment through the next node as well (a twin client), as two
// users who share a key do: the engine must decide one of them.
func (c *client) twice(shared bool, tmpl Op, send func(cl *client, node int, op *Op)) {
	if !shared || c.rng.IntN(2) == 0 {
		c.write(tmpl, send)
		return
	}
	twin := &client{w: c.w, id: c.id + c.w.Clients, node: (c.node + 1) % len(c.w.C.Engines), seen: c.seen, n: c.n}
	done := make(chan struct{})
	go func() {
		defer close(done)
		twin.write(tmpl, send)
	}()
	c.write(tmpl, send)
	<-done
	c.saw(twin.seen)
}

// judge reads an answer as the spec's client rules do.
func (c *client) judge(op *Op, code int, body []byte, hdr http.Header, err error) {
	op.Status = code
	if err != nil {
		op.Err = err.Error()
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			op.Outcome = Fail // never sent
		} else {
			op.Outcome = Unknown
		}
		return
	}
	if s := hdr.Get("X-Engine-Seq"); s != "" {
		op.Seq, _ = strconv.ParseUint(s, 10, 64)
		c.saw(op.Seq)
	}
	var e struct {
		Code  string `json:"code"`
		Error string `json:"error"`
	}
	if code != http.StatusOK {
		_ = json.Unmarshal(body, &e)
		op.Code = e.Code
		if e.Code == "" {
			op.Err = fmt.Sprintf("%.200s", body)
		}
	}
	switch {
	case code == http.StatusOK, code == http.StatusAccepted && e.Code == string(commands.CodeWriteRecorded):
		op.Outcome = OK // 202 write_recorded: done, the read models are behind
	case code == http.StatusConflict && e.Code == string(commands.CodeIdempotencyConflict):
		op.Outcome = Dup
	case code == http.StatusServiceUnavailable && e.Code != "" && commands.RetrySafe(commands.Code(e.Code)):
		op.Outcome = Fail
	case code >= 500:
		op.Outcome = Unknown
	default:
		op.Outcome = Refused
	}
}

func (c *client) saw(seq uint64) { c.seen = max(c.seen, seq) }

// paramOf is params[name] of an error body, as a string.
func paramOf(body []byte, name string) string {
	var e struct {
		Params map[string]any `json:"params"`
	}
	_ = json.Unmarshal(body, &e)
	s, _ := e.Params[name].(string)
	return s
}

// toCents is d in cents (rounded half-even past them).
func toCents(d events.Decimal) int64 {
	c, err := d.Mul(events.Int(100)).Int64()
	if err != nil {
		return 0
	}
	return c
}

// call sends one request: key as a bearer token when set, body as JSON,
// more headers; it answers the status, body and headers.
func call(cl *http.Client, base, key, method, path string, body any, hdr map[string]string) (int, []byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, resp.Header, err // the answer was cut: unknown
	}
	return resp.StatusCode, b, resp.Header, nil
}
