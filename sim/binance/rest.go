package binance

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svc/engine/sim/internal/simkit"
)

type secType int

const (
	secNone   secType = iota // public
	secKey                   // X-MBX-APIKEY only (a signature, if sent, is checked)
	secSigned                // X-MBX-APIKEY, timestamp, signature
)

// route is one REST endpoint: its security, its request weight, whether it counts as an order, and
// its handler. Handlers run with s.mu held and return a JSON value or an *APIError.
type route struct {
	sec     secType
	weight  int
	order   bool
	futures bool // a /fapi route: refused for keys without futures permission
	h       func(s *Sim, c *call) (any, error)
}

// call is one request as a handler sees it.
type call struct {
	params url.Values
	acct   *account
	now    time.Time
}

var routes = map[string]route{
	"GET /fapi/v1/ping":                    {secNone, 1, false, false, func(*Sim, *call) (any, error) { return map[string]any{}, nil }},
	"GET /fapi/v1/time":                    {secNone, 1, false, false, func(_ *Sim, c *call) (any, error) { return map[string]any{"serverTime": c.now.UnixMilli()}, nil }},
	"GET /fapi/v1/exchangeInfo":            {secNone, 1, false, false, (*Sim).exchangeInfo},
	"GET /fapi/v1/premiumIndex":            {secNone, 1, false, false, (*Sim).premiumIndex},
	"GET /fapi/v1/ticker/bookTicker":       {secNone, 2, false, false, (*Sim).bookTicker},
	"GET /fapi/v1/ticker/price":            {secNone, 1, false, false, (*Sim).tickerPrice},
	"GET /fapi/v2/ticker/price":            {secNone, 1, false, false, (*Sim).tickerPrice},
	"GET /fapi/v1/klines":                  {secNone, 5, false, false, (*Sim).klines},
	"GET /fapi/v2/account":                 {secSigned, 5, false, true, (*Sim).accountV2},
	"GET /fapi/v3/account":                 {secSigned, 5, false, true, (*Sim).accountV3},
	"GET /fapi/v2/balance":                 {secSigned, 5, false, true, (*Sim).balances},
	"GET /fapi/v3/balance":                 {secSigned, 5, false, true, (*Sim).balances},
	"GET /fapi/v2/positionRisk":            {secSigned, 5, false, true, (*Sim).positionRiskV2},
	"GET /fapi/v3/positionRisk":            {secSigned, 5, false, true, (*Sim).positionRiskV3},
	"GET /fapi/v1/accountConfig":           {secSigned, 5, false, true, (*Sim).accountConfig},
	"GET /fapi/v1/positionSide/dual":       {secSigned, 30, false, true, (*Sim).getDual},
	"POST /fapi/v1/positionSide/dual":      {secSigned, 1, false, true, (*Sim).postDual},
	"GET /fapi/v1/multiAssetsMargin":       {secSigned, 30, false, true, (*Sim).getMulti},
	"POST /fapi/v1/multiAssetsMargin":      {secSigned, 1, false, true, (*Sim).postMulti},
	"POST /fapi/v1/leverage":               {secSigned, 1, false, true, (*Sim).postLeverage},
	"POST /fapi/v1/order":                  {secSigned, 0, true, true, (*Sim).placeOrder},
	"PUT /fapi/v1/order":                   {secSigned, 1, true, true, (*Sim).modifyOrder},
	"DELETE /fapi/v1/order":                {secSigned, 1, false, true, (*Sim).cancelOrder},
	"GET /fapi/v1/order":                   {secSigned, 1, false, true, (*Sim).queryOrder},
	"GET /fapi/v1/openOrder":               {secSigned, 1, false, true, (*Sim).queryOpenOrder},
	"GET /fapi/v1/openOrders":              {secSigned, 1, false, true, (*Sim).openOrders},
	"GET /fapi/v1/allOrders":               {secSigned, 5, false, true, (*Sim).allOrders},
	"DELETE /fapi/v1/allOpenOrders":        {secSigned, 1, false, true, (*Sim).cancelAll},
	"GET /fapi/v1/userTrades":              {secSigned, 5, false, true, (*Sim).userTrades},
	"POST /fapi/v1/batchOrders":            {secSigned, 5, true, true, (*Sim).batchOrders},
	"POST /fapi/v1/algoOrder":              {secSigned, 0, true, true, (*Sim).placeAlgoOrder},
	"GET /fapi/v1/algoOrder":               {secSigned, 1, false, true, (*Sim).queryAlgoOrder},
	"DELETE /fapi/v1/algoOrder":            {secSigned, 1, false, true, (*Sim).cancelAlgoOrder},
	"GET /fapi/v1/openAlgoOrders":          {secSigned, 1, false, true, (*Sim).openAlgoOrders},
	"GET /fapi/v1/allAlgoOrders":           {secSigned, 5, false, true, (*Sim).allAlgoOrders},
	"DELETE /fapi/v1/algoOpenOrders":       {secSigned, 1, false, true, (*Sim).cancelAllAlgos},
	"POST /fapi/v1/listenKey":              {secKey, 1, false, true, (*Sim).newListenKey},
	"PUT /fapi/v1/listenKey":               {secKey, 1, false, true, (*Sim).keepListenKey},
	"DELETE /fapi/v1/listenKey":            {secKey, 1, false, true, (*Sim).closeListenKey},
	"GET /sapi/v1/account/apiRestrictions": {secSigned, 1, false, false, (*Sim).apiRestrictions},
}

// serveREST runs one REST request through the exchange's gates in its order: ban, faults, weight,
// API key, timestamp, signature, permissions; then the handler; then the answer or, under an
// accept-then-drop fault, a closed connection.
func (s *Sim) serveREST(w http.ResponseWriter, r *http.Request) {
	name := r.Method + " " + r.URL.Path
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	params, perr := mergeParams(r.URL.RawQuery, string(body))
	apiKey := r.Header.Get("X-MBX-APIKEY")
	who := apiKey
	if who == "" {
		who = simkit.RemoteIP(r)
	}

	s.mu.Lock()
	now := time.Now()
	s.requests[name]++
	rt, known := routes[name]
	f := s.faults.Take(name, nil)
	lim := s.limiter(who, now)
	s.mu.Unlock()

	if f != nil && f.Latency > 0 {
		time.Sleep(f.Latency)
	}

	s.mu.Lock()
	now = time.Now()
	hdr := w.Header()
	var ans any
	var err error
	switch {
	case lim.bannedUntil.After(now):
		err = lim.banError(now)
	case f != nil && f.Ban > 0:
		lim.bannedUntil = now.Add(f.Ban)
		err = lim.banError(now)
	case f != nil && f.Throttle > 0:
		lim.throttledUntil = now.Add(f.Throttle)
		err = lim.throttle(s, now)
	case f != nil && f.Status >= 500:
		err = &APIError{Status: f.Status, Code: codeDisconnected, Msg: "Internal error; unable to process your request. Please try again."}
	case !known:
		err = errNotFoundRoute
	default:
		err = lim.spend(s, rt, now)
	}
	if err == nil && perr != nil {
		err = perr
	}
	var acct *account
	if err == nil && rt.sec != secNone {
		acct, err = s.authenticate(r.URL.RawQuery, string(body), rt, apiKey, params, now)
	}
	if err == nil {
		ans, err = rt.h(s, &call{params: params, acct: acct, now: now})
	}
	lim.headers(hdr, rt.order, now)
	drop := err == nil && f != nil && f.Drop
	s.mu.Unlock()

	if f != nil && f.AnswerDelay > 0 {
		time.Sleep(f.AnswerDelay)
	}
	if drop {
		simkit.DropConnection(w)
		return
	}
	writeAnswer(w, ans, err)
}

// mergeParams reads the query string and the form body as the exchange does: one set of
// parameters, a name sent in both places counting once.
func mergeParams(query, body string) (url.Values, error) {
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, errIllegal("query")
	}
	if body != "" {
		b, err := url.ParseQuery(body)
		if err != nil {
			return nil, errIllegal("body")
		}
		for k, v := range b {
			if _, ok := q[k]; !ok {
				q[k] = v
			}
		}
	}
	return q, nil
}

// authenticate checks the key, timestamp and signature of a request with s.mu held.
func (s *Sim) authenticate(rawQuery, body string, rt route, apiKey string, p url.Values, now time.Time) (*account, error) {
	if apiKey == "" || len(apiKey) > 128 {
		return nil, errBadKeyFormat
	}
	acct, ok := s.accounts[apiKey]
	if !ok {
		return nil, errRejectedKey
	}
	sig := p.Get("signature")
	if rt.sec == secSigned || sig != "" {
		if rt.sec == secSigned {
			ts := p.Get("timestamp")
			if ts == "" {
				return nil, errMandatory("timestamp")
			}
			ms, err := strconv.ParseInt(ts, 10, 64)
			if err != nil {
				return nil, errIllegal("timestamp")
			}
			window := int64(5000)
			if v := p.Get("recvWindow"); v != "" {
				window, err = strconv.ParseInt(v, 10, 64)
				if err != nil || window <= 0 || window > 60000 {
					return nil, errInvalidValue("recvWindow")
				}
			}
			server := now.UnixMilli()
			if ms > server+1000 {
				return nil, errTimestampNew
			}
			if server-ms > window {
				return nil, errTimestampOld
			}
			if sig == "" {
				return nil, errMandatory("signature")
			}
		}
		if !validSignature(acct.secret, rawQuery, body, sig) {
			return nil, errSignature
		}
	}
	if rt.futures && (!acct.futures || acct.portfolio) {
		return nil, errRejectedKey
	}
	return acct, nil
}

// validSignature recomputes the HMAC-SHA256 of the query string without its signature, followed
// directly by the form body, as the exchange defines totalParams.
func validSignature(secret, rawQuery, body, sig string) bool {
	parts := strings.Split(rawQuery, "&")
	kept := parts[:0]
	for _, p := range parts {
		if !strings.HasPrefix(p, "signature=") {
			kept = append(kept, p)
		}
	}
	payload := strings.Join(kept, "&") + body
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(payload))
	want := mac.Sum(nil)
	got, err := hex.DecodeString(strings.ToLower(sig))
	return err == nil && hmac.Equal(want, got)
}

func writeAnswer(w http.ResponseWriter, ans any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		ae, ok := err.(*APIError)
		if !ok {
			ae = &APIError{Status: http.StatusInternalServerError, Code: -1000, Msg: "An unknown error occured while processing the request."}
		}
		if ae.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
		}
		w.WriteHeader(ae.Status)
		_ = json.NewEncoder(w).Encode(ae)
		return
	}
	_ = json.NewEncoder(w).Encode(ans)
}

// limiter counts one API key's (or one IP's) request weight and orders, as the exchange's
// X-MBX-USED-WEIGHT-1M and X-MBX-ORDER-COUNT-* headers report them. The exchange counts weight per
// IP; the simulator counts it per API key so tests sharing 127.0.0.1 do not share a budget.
type limiter struct {
	minute         int64 // unix minute of the weight and order counts
	weight         int
	orders1m       int
	tenSec         int64
	orders10s      int
	strikes        int // requests refused with 429 this minute
	throttledUntil time.Time
	bannedUntil    time.Time
}

func (s *Sim) limiter(who string, now time.Time) *limiter {
	l, ok := s.limits[who]
	if !ok {
		l = &limiter{}
		s.limits[who] = l
	}
	l.roll(now)
	return l
}

func (l *limiter) roll(now time.Time) {
	if m := now.Unix() / 60; m != l.minute {
		l.minute, l.weight, l.orders1m, l.strikes = m, 0, 0, 0
	}
	if t := now.Unix() / 10; t != l.tenSec {
		l.tenSec, l.orders10s = t, 0
	}
}

// spend charges a request's weight, refusing it with 429 past the budget and with 418 once a client
// keeps sending through its 429s.
func (l *limiter) spend(s *Sim, rt route, now time.Time) error {
	l.roll(now)
	if l.throttledUntil.After(now) {
		return l.throttle(s, now)
	}
	if l.weight+rt.weight > s.opts.WeightLimit {
		l.throttledUntil = now.Truncate(time.Minute).Add(time.Minute)
		return l.throttle(s, now)
	}
	if rt.order && (l.orders10s+1 > s.opts.OrderLimit10s || l.orders1m+1 > s.opts.OrderLimit1m) {
		e := refuse(http.StatusTooManyRequests, codeTooManyOrders, "Too many new orders; current limit is %d orders per MINUTE.", s.opts.OrderLimit1m)
		e.RetryAfter = 10
		return e
	}
	l.weight += rt.weight
	if rt.order {
		l.orders1m++
		l.orders10s++
	}
	return nil
}

func (l *limiter) throttle(s *Sim, now time.Time) error {
	l.strikes++
	if l.strikes > s.opts.BanAfter {
		l.bannedUntil = now.Add(s.opts.BanFor)
		return l.banError(now)
	}
	e := refuse(http.StatusTooManyRequests, codeTooManyRequests,
		"Too many requests; current limit is %d requests per minute. Please use the websocket for live updates to avoid polling the API.", s.opts.WeightLimit)
	e.RetryAfter = secondsUntil(now, l.throttledUntil)
	return e
}

func (l *limiter) banError(now time.Time) error {
	e := refuse(http.StatusTeapot, codeTooManyRequests,
		"Way too many requests; IP banned until %d. Please use the websocket for live updates to avoid bans.", l.bannedUntil.UnixMilli())
	e.RetryAfter = secondsUntil(now, l.bannedUntil)
	return e
}

func secondsUntil(now, t time.Time) int {
	d := t.Sub(now)
	n := int((d + time.Second - 1) / time.Second)
	if n < 1 {
		n = 1
	}
	return n
}

func (l *limiter) headers(h http.Header, order bool, now time.Time) {
	h.Set("X-MBX-USED-WEIGHT-1M", strconv.Itoa(l.weight))
	if order {
		h.Set("X-MBX-ORDER-COUNT-1M", strconv.Itoa(l.orders1m))
		h.Set("X-MBX-ORDER-COUNT-10S", strconv.Itoa(l.orders10s))
	}
}
