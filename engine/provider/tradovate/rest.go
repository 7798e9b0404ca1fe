package tradovate

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
)

// maxBody bounds one answer the adapter reads.
const maxBody = 8 << 20

// request is one REST call.
type request struct {
	op     op
	method string
	path   string // "/order/placeorder": also the endpoint a penalty is kept for
	query  url.Values
	body   any    // written as JSON; nil: no body
	raw    []byte // a body already written (the token request): sent as is
}

// send sends r through b with the bearer token (none when "") and decodes
// a 2xx answer into out. It sends a write once. A read (and the token
// request) answered with a penalty ticket whose p-time is within
// Limits.MaxPenaltyWait waits it out and is sent again with the ticket, as
// the API asks; any other penalty is the budget's typed error. A 401 is
// errExpired; other statuses are the budget's errors or *statusError.
func (p *Provider) send(ctx context.Context, b *budget, bearer string, r request, out any) error {
	body := r.raw
	if body == nil && r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		ticket, err := b.admit(ctx, r.path, r.op.Write())
		if err != nil {
			return err
		}
		raw, status, err := p.roundTrip(ctx, b, bearer, r, withTicket(body, ticket), ticket)
		if err != nil {
			return err
		}
		if pen, ok := penaltyOf(raw); ok {
			err := b.penalize(r.path, pen)
			if r.op.Write() || attempt > 0 || pen.Captcha || seconds(pen.Time) > b.limits.MaxPenaltyWait {
				return err
			}
			continue // admit waits the p-time out, then the ticket goes along
		}
		b.served(r.path)
		if out == nil || status == http.StatusNoContent {
			return nil
		}
		if err := json.Unmarshal(raw, out); err != nil {
			return errMalformed
		}
		return nil
	}
}

// roundTrip sends one HTTP request and reads the answer's body. Transport
// failures are *adapterkit.SendError (Sent: the request was written).
func (p *Provider) roundTrip(ctx context.Context, b *budget, bearer string, r request, body []byte, ticket string) ([]byte, int, error) {
	ctx, cancel := p.call(ctx)
	defer cancel()
	u := p.opts.RestURL + r.path
	q := r.query
	if ticket != "" && body == nil {
		q = cloneValues(q)
		q.Set("p-ticket", ticket)
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return nil, 0, &adapterkit.SendError{Provider: "tradovate", Err: err}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if r.op.Write() && provider.SendByPassed(ctx, p.opts.Now()) != nil {
		// The last check before the write goes out (its budget waited
		// already). Tradovate has no receive window: a write that left by
		// then is bounded by its timeout, at which its connection is reset
		// (ReceiveWindow).
		return nil, 0, &adapterkit.SendError{Provider: "tradovate", Err: provider.ErrSendByPassed}
	}
	req, wrote := adapterkit.TraceWrite(req)
	resp, err := (&http.Client{Transport: p.opts.HTTP, CheckRedirect: noRedirect}).Do(req)
	if err != nil {
		return nil, 0, &adapterkit.SendError{Provider: "tradovate", Sent: wrote.Load(), Err: adapterkit.CleanCause(err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, resp.StatusCode, &adapterkit.SendError{Provider: "tradovate", Sent: true, Err: err}
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return nil, resp.StatusCode, errExpired
	}
	if err := b.observe(resp.StatusCode, resp.Header); err != nil {
		return nil, resp.StatusCode, err
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return nil, resp.StatusCode, &statusError{status: resp.StatusCode}
	}
	return raw, resp.StatusCode, nil
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// withTicket adds "p-ticket" to a JSON object body (the API asks for the
// identical body with the ticket as one more field). A body that is not an
// object, or no ticket, is returned as is.
func withTicket(body []byte, ticket string) []byte {
	if ticket == "" || len(body) < 2 || body[0] != '{' {
		return body
	}
	out := make([]byte, 0, len(body)+len(ticket)+16)
	out = append(out, `{"p-ticket":`...)
	out = appendJSONString(out, []byte(ticket))
	rest := bytes.TrimSpace(body[1:])
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// penaltyOf reads a penalty answer: an object with a p-ticket or
// p-captcha field instead of the result.
func penaltyOf(raw []byte) (penalty, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' || !(bytes.Contains(t, []byte(`"p-ticket"`)) || bytes.Contains(t, []byte(`"p-captcha"`))) {
		return penalty{}, false
	}
	var p penalty
	if json.Unmarshal(t, &p) != nil || (p.Ticket == "" && !p.Captcha) {
		return penalty{}, false
	}
	return p, true
}

// appendJSONString appends b as a JSON string. It works on bytes so a
// secret is never turned into an immutable string.
func appendJSONString(dst, b []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for len(b) > 0 {
		c := b[0]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			b = b[1:]
			continue
		}
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, b[:n]...)
		}
		b = b[n:]
	}
	return append(dst, '"')
}

// tokenBody writes the access-token request's body with the password in
// it. The caller wipes the body after sending.
func tokenBody(name string, password []byte, app App) []byte {
	fields, _ := json.Marshal(accessTokenRequest{Name: name, AppID: app.ID, AppVersion: app.Version,
		DeviceID: app.DeviceID, CID: app.CID, Sec: app.Secret})
	out := make([]byte, 0, len(fields)+len(password)*2+16)
	out = append(out, `{"password":`...)
	out = appendJSONString(out, password)
	out = append(out, ',')
	out = append(out, fields[1:]...)
	clear(fields)
	return out
}

// query builds a query of name=value pairs.
func query(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return q
}

// idQuery is ?name=<id>.
func idQuery(name string, i eid) url.Values { return query(name, strconv.FormatInt(int64(i), 10)) }
