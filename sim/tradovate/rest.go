package tradovate

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/svc/engine/sim/internal/simkit"
)

// answer is what one request gets, over REST or a socket: a status and a JSON body (or, off the 2xx
// path, the error text the provider sends as a string). drop loses it after the request was
// carried out.
type answer struct {
	status int
	body   any
	text   string
	drop   bool
}

func ok(v any) answer            { return answer{status: http.StatusOK, body: v} }
func badRequest(t string) answer { return answer{status: http.StatusBadRequest, text: t} }
func notFound(t string) answer   { return answer{status: http.StatusNotFound, text: t} }
func unauthorized() answer       { return answer{status: http.StatusUnauthorized, text: "Access is denied"} }
func forbidden(t string) answer  { return answer{status: http.StatusForbidden, text: t} }
func tooMany() answer            { return answer{status: http.StatusTooManyRequests} }
func serverError(status int) answer {
	return answer{status: status, text: "Internal Server Error, error id: " + randomToken(12)}
}

// request is one call of an endpoint as the pipeline sees it, from REST or a socket.
type request struct {
	endpoint string // lower case, without /v1: "order/placeorder"
	query    url.Values
	body     []byte
	bearer   string   // REST: the Authorization header's token
	conn     *wsConn  // socket: the connection it came on
	remote   string   // the caller's address, for limits before authentication
	id       int64    // socket: the request's id
	after    []func() // socket: what to send once the answer is out (still under the lock)
}

// serveREST runs one REST request: /v1/<entity>/<operation>. The provider does not enforce the
// method (GET and POST both work), and neither does the simulator.
func (s *Sim) serveREST(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	req := &request{endpoint: strings.ToLower(strings.TrimPrefix(r.URL.Path, "/v1/")), query: r.URL.Query(), body: body,
		remote: simkit.RemoteIP(r)}
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		req.bearer = strings.TrimSpace(h[7:])
	}
	a := s.handle(req)
	if a.drop {
		simkit.DropConnection(w)
		return
	}
	switch {
	case a.body != nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_ = json.NewEncoder(w).Encode(a.body)
	case a.text != "":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.text)
	default:
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(a.status)
	}
}

// pTicket is the p-ticket a retried request carries in its JSON body, or "".
func pTicket(body []byte) string {
	if len(body) == 0 || body[0] != '{' {
		return ""
	}
	var b struct {
		Ticket string `json:"p-ticket"`
	}
	_ = json.Unmarshal(body, &b)
	return b.Ticket
}

// handle runs one request through the provider's gates in order — an early penalty ticket, the
// injected fault (after its latency), the lockout, the penalty, authentication, the user's request
// rate — then the endpoint; an accept-then-drop fault marks the answer lost. A socket request is
// answered before the lock is let go, so its answer precedes every event that follows it.
func (s *Sim) handle(req *request) answer {
	tv := pTicket(req.body)
	s.mu.Lock()
	now := s.now()
	s.requests[req.endpoint]++
	redeemed := tv != "" && s.redeem(tv, req.endpoint, now)
	var early *ticket
	if !redeemed && tv != "" {
		early = s.early(tv, req.endpoint, now)
	}
	var f *Fault
	if early == nil {
		f = s.takeFault(req.endpoint, redeemed)
	}
	s.mu.Unlock()
	if f != nil && f.Latency > 0 {
		time.Sleep(f.Latency)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.now()
	a := s.gate(req, f, early, tv, now)
	if f != nil && f.Drop && a.status == http.StatusOK {
		a.drop = true
	}
	if req.conn != nil {
		s.reply(req, a)
	}
	return a
}

// gate is handle's part under the lock.
func (s *Sim) gate(req *request, f *Fault, early *ticket, tv string, now time.Time) answer {
	if early != nil {
		return penalty(tv, early.due.Sub(now), false)
	}
	if f != nil && f.Status != 0 {
		if f.Status >= 500 {
			return serverError(f.Status)
		}
		return answer{status: f.Status}
	}

	// Who is calling, for the lockout: the token's user, else the address.
	var u *user
	var tok *token
	switch {
	case req.conn != nil && req.conn.sess != nil:
		u = req.conn.sess.user
	case req.bearer != "":
		if t := s.tokens[req.bearer]; t != nil {
			tok, u = t, t.sess.user
		}
	}
	who := "addr:" + req.remote
	if u != nil {
		who = "user:" + strconv.FormatInt(u.id, 10)
	}
	if until, locked := s.lockouts[who]; locked && now.Before(until) {
		return tooMany()
	}
	if f != nil && f.Lockout > 0 {
		s.lockouts[who] = now.Add(f.Lockout)
		return tooMany()
	}
	if f != nil && f.penalizes() {
		if f.Captcha {
			d := f.Penalty
			if d <= 0 {
				d = time.Hour
			}
			v := randomToken(24)
			s.tickets[v] = &ticket{key: req.endpoint, due: now.Add(d), captcha: true}
			return penalty(v, d, true)
		}
		return s.issueTicket(req.endpoint, f.Penalty, now)
	}

	switch req.endpoint {
	case "auth/accesstokenrequest":
		return s.accessToken(req.body, req.remote, now)
	case "authorize":
		if req.conn == nil {
			return notFound("Not found: authorize")
		}
		return s.authorize(req.conn, req.body, now)
	}
	var sess *session
	if req.conn != nil {
		if req.conn.sess == nil || !req.conn.sess.valid(now) {
			return unauthorized()
		}
		sess = req.conn.sess
	} else {
		if tok == nil || tok.md || !tok.valid(now) {
			return unauthorized()
		}
		sess = tok.sess
	}
	if !s.userAdmits(u.id, now) {
		s.lockouts[who] = now.Add(s.opts.LockoutFor)
		return tooMany()
	}
	return s.dispatch(req, sess, now)
}

// userAdmits counts one request of user id at now against the user-level limits (any second,
// minute and hour, rolling) and reports whether it is within all of them; one over any is not
// counted.
func (s *Sim) userAdmits(id int64, now time.Time) bool {
	limits := []struct {
		n    int
		span time.Duration
	}{{s.opts.RequestsPerSecond, time.Second}, {s.opts.RequestsPerMinute, time.Minute}, {s.opts.RequestsPerHour, time.Hour}}
	keep := time.Duration(0)
	for _, l := range limits {
		if l.n > 0 {
			keep = l.span
		}
	}
	if keep == 0 {
		return true
	}
	w := s.window("req:"+strconv.FormatInt(id, 10), keep, now)
	for _, l := range limits {
		if l.n <= 0 {
			continue
		}
		from := sort.Search(len(w.times), func(i int) bool { return w.times[i].After(now.Add(-l.span)) })
		if len(w.times)-from >= l.n {
			return false
		}
	}
	w.times = append(w.times, now)
	return true
}

// dispatch runs an authenticated request's endpoint with s.mu held.
func (s *Sim) dispatch(req *request, sess *session, now time.Time) answer {
	u := sess.user
	isMD := strings.HasPrefix(req.endpoint, "md/")
	if req.conn != nil && req.conn.md != isMD || req.conn == nil && isMD {
		return notFound("Not found: " + req.endpoint)
	}
	if isMD {
		return s.mdDispatch(req, u, now)
	}
	switch req.endpoint {
	case "auth/renewaccesstoken":
		return ok(s.tokenResponse(sess, now))
	case "auth/me":
		return s.me(u)
	case "cashbalance/getcashbalancesnapshot":
		return s.cashSnapshot(u, req.body)
	case "order/placeorder":
		return s.placeOrder(u, sess, req.body, now)
	case "order/placeoso":
		return s.placeOSO(u, sess, req.body, now)
	case "order/placeoco":
		return s.placeOCO(u, sess, req.body, now)
	case "order/modifyorder":
		return s.modifyOrder(u, sess, req.body, now)
	case "order/cancelorder":
		return s.cancelOrder(u, sess, req.body, now)
	case "order/liquidateposition":
		return s.liquidatePosition(u, sess, req.body, now)
	case "contract/rollcontract":
		return s.rollContract(req.body, now)
	case "user/syncrequest":
		a := s.syncSnapshot(u, req.body)
		if req.conn != nil && a.status == http.StatusOK {
			req.conn.synced = true
		}
		return a
	}
	kind, op, found := strings.Cut(req.endpoint, "/")
	if _, known := entityKinds[kind]; found && known {
		q := map[string]string{}
		for k, v := range req.query {
			if len(v) > 0 {
				q[strings.ToLower(k)] = v[0]
			}
		}
		return s.entityRead(u, kind, op, q)
	}
	return notFound("Not found: " + req.endpoint)
}

// decodeBody reads a JSON request body into v. A body that is not JSON, or that gives a field the
// wrong type, answers 400 with the provider's text style ("No usable value for …").
func decodeBody(body []byte, v any) *answer {
	if len(body) == 0 {
		a := badRequest("No usable value for body")
		return &a
	}
	if err := json.Unmarshal(body, v); err != nil {
		field := ""
		if te, isType := err.(*json.UnmarshalTypeError); isType {
			field = te.Field
		}
		a := badRequest("No usable value for " + field)
		if field == "" {
			a = badRequest("Invalid JSON: " + err.Error())
		}
		return &a
	}
	return nil
}
