package market

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine/market/bars"
	"github.com/svc/engine/gateway/httpx"
)

// conn is one SSE connection's outbox. Each subscription holds at most its
// newest bar and, when a bar closed meanwhile, that closed bar before it
// (conflation): a slow client skips intermediate updates, never a close, and
// never slows the fan-out or other clients.
type conn struct {
	mu      sync.Mutex
	pending [][]bars.Update // per subscription
	order   []int           // subscriptions with pending updates, oldest first
	ready   chan struct{}
}

func newConn(n int) *conn {
	return &conn{pending: make([][]bars.Update, n), ready: make(chan struct{}, 1)}
}

// Wake tells the connection's writer that updates are pending.
func (c *conn) Wake() {
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

// Offer queues u for subscription sub; the fan-out wakes the writer once per burst.
func (c *conn) Offer(sub int, u bars.Update) {
	c.mu.Lock()
	q := c.pending[sub]
	switch {
	case len(q) == 0:
		c.order = append(c.order, sub)
		q = append(q, u)
	case q[len(q)-1].Bar.Time == u.Bar.Time:
		q[len(q)-1] = u
	case q[len(q)-1].Bar.Time < u.Bar.Time:
		if len(q) == 2 {
			q[0] = q[1]
			q = q[:1]
		}
		q = append(q, u)
	}
	c.pending[sub] = q
	c.mu.Unlock()
}

type taken struct {
	sub int
	u   bars.Update
}

func (c *conn) take(dst []taken) []taken {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.order {
		for _, u := range c.pending[s] {
			dst = append(dst, taken{sub: s, u: u})
		}
		c.pending[s] = c.pending[s][:0]
	}
	c.order = c.order[:0]
	return dst
}

// barPrefix is the start of a bar event's data: {"instrument":..,"tf":..,"bar":
func barPrefix(instrument, tf string) []byte {
	b := append([]byte(`{"instrument":`), appendString(nil, instrument)...)
	b = append(b, `,"tf":`...)
	b = appendString(b, tf)
	return append(b, `,"bar":`...)
}

// pump writes the connection's bar events until the client goes, the server
// drains, or a write fails. Events are `bar`; a comment heartbeat every 15 s.
func (h *Handlers) pump(w http.ResponseWriter, r *http.Request, sse *httpx.SSE, c *conn, prefixes [][]byte) error {
	var buf []byte
	var batch []taken
	return httpx.Pump(r.Context(), sse, h.m.Done, c.ready, func(struct{}) error {
		batch = c.take(batch[:0])
		buf = buf[:0]
		for _, t := range batch {
			buf = append(buf, "event: bar\ndata: "...)
			buf = append(buf, prefixes[t.sub]...)
			buf = append(buf, t.u.JSON...)
			buf = append(buf, "}\n\n"...)
		}
		if len(buf) == 0 {
			return nil
		}
		if err := sse.Write(buf); err != nil {
			return err
		}
		sse.Flush()
		return nil
	})
}

// stream serves one instrument's live bars: GET /api/market/stream?instrument=&tf=.
// Errors before the stream opens are answered as HTTP errors; the stream is
// admitted (the credential's bound) before any subscription is made.
func (h *Handlers) Stream(w http.ResponseWriter, r *http.Request) error {
	instrument, tf := r.URL.Query().Get("instrument"), r.URL.Query().Get("tf")
	if tf == "" {
		return badRequest(commands.CodeInvalidTimeframe, "tf is required, e.g. 1m, 15m, 4h, 1d", map[string]any{"tf": tf})
	}
	if err := httpx.AdmitStream(w); err != nil {
		return err
	}
	c := newConn(1)
	cancel, err := h.subscribe(r, instrument, tf, c, 0)
	if err != nil {
		return err
	}
	defer cancel()
	sse, err := httpx.StartSSE(w)
	if err != nil {
		return err
	}
	return h.pump(w, r, sse, c, [][]byte{barPrefix(instrument, tf)})
}

// streamError is the data of a tagged `error` event of a refused subscription.
type streamError struct {
	Sub        string         `json:"sub"`
	Instrument string         `json:"instrument"`
	TF         string         `json:"tf"`
	Error      string         `json:"error"`
	Code       commands.Code  `json:"code"`
	Params     map[string]any `json:"params,omitempty"`
}

// streams serves up to 24 subscriptions on one connection:
// GET /api/market/streams?subs=INSTRUMENT~tf,... Each refused subscription
// (a bad timeframe or expression, an unknown symbol, a futures instrument
// without a futures source, one past the 24th) becomes a tagged `error`
// event while the rest stream.
func (h *Handlers) Streams(w http.ResponseWriter, r *http.Request) error {
	tokens := commaList(r.URL.Query().Get("subs"))
	if len(tokens) == 0 {
		return badRequest(commands.CodeInvalidRequest, "subs is required: a comma-separated list of INSTRUMENT~tf", nil)
	}
	if len(tokens) > maxTokens {
		return badRequest(commands.CodeTooManySubscriptions, "at most 24 subscriptions per stream", map[string]any{"limit": MaxSubs})
	}
	if err := httpx.AdmitStream(w); err != nil {
		return err
	}
	c := newConn(len(tokens))
	var refusals []streamError
	var prefixes [][]byte
	var cancels []func()
	defer func() {
		for _, cancel := range cancels {
			cancel()
		}
	}()
	live := 0
	for i, tok := range tokens {
		instrument, tf, found := strings.Cut(tok, "~")
		prefixes = append(prefixes, barPrefix(instrument, tf))
		refuse := func(err error) {
			e := streamError{Sub: tok, Instrument: instrument, TF: tf, Error: err.Error(), Code: commands.CodeInvalidRequest}
			if he, ok := err.(*httpx.Error); ok {
				e.Error, e.Code, e.Params = he.Msg, he.Code, he.Params
			}
			refusals = append(refusals, e)
		}
		switch {
		case !found:
			refuse(badRequest(commands.CodeInvalidSubscription, "a subscription is INSTRUMENT~tf", nil))
			continue
		case live == MaxSubs:
			refuse(&httpx.Error{Code: commands.CodeSubscriptionLimit, Msg: "at most 24 subscriptions per stream; this one is refused", Params: map[string]any{"limit": MaxSubs}})
			continue
		}
		cancel, err := h.subscribe(r, instrument, tf, c, i)
		if err != nil {
			refuse(err)
			continue
		}
		cancels = append(cancels, cancel)
		live++
	}
	sse, err := httpx.StartSSE(w)
	if err != nil {
		return err
	}
	for _, e := range refusals {
		var b bytes.Buffer
		_ = json.NewEncoder(&b).Encode(e)
		if err := sse.Event("error", "", bytes.TrimSpace(b.Bytes())); err != nil {
			return nil
		}
	}
	return h.pump(w, r, sse, c, prefixes)
}
