// Package httpx holds the gateway's shared HTTP pieces: the one error writer,
// strict JSON decoding, the principal in a request's context and SSE writing.
package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	gojson "github.com/goccy/go-json"
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/events"
	"github.com/svc/engine/projections"
)

// Principal is the resolved caller of a request.
type Principal struct {
	events.Principal
	Kind    string      // trading, partner, venue, connect, session, dashboard, origin
	Origin  string      // the registered browser origin, for Kind origin
	Session string      // the session id, for Kind session and dashboard
	Venue   *VenueGrant // for Kind venue
	App     *AppGrant   // for Kind connect
	cred    string      // Credential, once KeepCredential made it
}

// Credential names what the principal counts against (rate limits, stream
// bounds, its writes): a registered origin, a signed-in user, or a key.
func (p Principal) Credential() string {
	if p.cred != "" {
		return p.cred
	}
	switch p.Kind {
	case "origin":
		return "origin:" + p.Origin
	case "session", "dashboard":
		return "user:" + p.UserID
	}
	return "key:" + p.KeyID
}

// KeepCredential makes p's Credential once, for every later call on p and
// on its copies (the admitted principal of a request asks it more than once).
// A copy may change OnBehalfOf (a venue or Connect key naming its trader),
// never the fields the credential is made of: Kind, Origin, UserID, KeyID.
func (p *Principal) KeepCredential() string {
	p.cred = p.Credential()
	return p.cred
}

// AppGrant is what a Connect app key grants: one app in one environment,
// while the owner who created it owns the app's organization.
type AppGrant struct {
	AppID     string
	CreatedBy string
	Env       string
}

// VenueGrant is what a venue key grants: one venue, its scopes, and the
// owner who issued it (the key works only while they are an owner).
type VenueGrant struct {
	VenueID   string
	Scopes    []string
	CreatedBy string
}

type ctxKey int

const (
	principalKey ctxKey = 1
	traceKey     ctxKey = 2
	stateKey     ctxKey = 3
)

// RequestIDHeader is the response header naming a request's id, sent on every
// answer; error bodies carry the same id as requestId.
const RequestIDHeader = "X-Request-Id"

// Trace is what the request log line knows of one request: its id, given when
// the request arrives, and the route and the error code of its answer, filled
// in while it is served. It is written and read by the request's own
// goroutine only.
type Trace struct {
	ID    string
	Route string // the matched route's template; empty: no route matched
	Code  string // the error code WriteError answered with, if any
}

// state is the gateway's own state of one request (Begin), the one value
// of the request's context that the middleware reads and writes instead
// of adding a value, and copying the request, each: its trace, its
// principal once admitted and the newest log sequence its writes committed
// at. It is written by the request's own goroutine; seq by any goroutine
// the request's handler starts.
type state struct {
	context.Context
	trace     Trace
	principal Principal // the admitted principal (SetPrincipal)
	admitted  bool      // principal is set
	seq       atomic.Uint64
}

// Value answers the state's keys and passes the others on. A value stored
// under the same key in a context made from this one is found first, as
// with context.WithValue.
func (s *state) Value(key any) any {
	switch key {
	case traceKey:
		return &s.trace
	case stateKey:
		return s
	case principalKey:
		if s.admitted {
			return &s.principal // a pointer into s: no copy of the principal an order
		}
	}
	return s.Context.Value(key)
}

// Begin gives r the gateway's state of one request (one context value and
// one copy of the request for the whole chain of middleware): its trace
// (TraceOf) with id, its principal once admitted (SetPrincipal) and the
// newest log sequence its writes committed at (CommitSeq).
func Begin(r *http.Request, id string) (*http.Request, *Trace) {
	s := &state{Context: r.Context(), trace: Trace{ID: id}}
	return r.WithContext(s), &s.trace
}

// WithTrace stores t in ctx.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey, t)
}

// TraceOf returns the request's trace, nil outside the gateway's request log.
func TraceOf(r *http.Request) *Trace {
	t, _ := r.Context().Value(traceKey).(*Trace)
	return t
}

// CommitSeq is where the newest log sequence the request of ctx committed
// at is kept, in the gateway's state of the request (Begin); nil without one.
func CommitSeq(ctx context.Context) *atomic.Uint64 {
	if s, ok := ctx.Value(stateKey).(*state); ok {
		return &s.seq
	}
	return nil
}

// WithPrincipal stores p in ctx. Under principalKey a context holds a
// *Principal, as the gateway's state (Begin) answers it.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey, &p)
}

// SetPrincipal is r with p as its principal (PrincipalOf): r itself when it
// carries the gateway's state (Begin) and no principal yet, else a copy of
// r with p in its context (WithPrincipal).
func SetPrincipal(r *http.Request, p Principal) *http.Request {
	ctx := r.Context()
	if s, ok := ctx.Value(stateKey).(*state); ok && ctx.Value(principalKey) == nil {
		s.principal, s.admitted = p, true
		return r
	}
	return r.WithContext(WithPrincipal(ctx, p))
}

// PrincipalOf returns the request's resolved principal.
func PrincipalOf(r *http.Request) (Principal, bool) {
	p, ok := r.Context().Value(principalKey).(*Principal)
	if !ok {
		return Principal{}, false
	}
	return *p, true
}

// Family selects the error shape of a route family.
type Family int

const (
	// Trading routes (and account, risk, balance, partner): error sentence plus code and params.
	Trading Family = iota
	// Venue routes: the code itself in error, with field or params.
	Venue
)

// Error is an HTTP error a handler returns; Refusal covers domain refusals.
type Error struct {
	Status     int
	Code       commands.Code
	Msg        string
	Params     map[string]any
	Field      string
	RetryAfter int // seconds; 0: no header
	Extra      map[string]any
}

func (e *Error) Error() string { return e.Msg }

// Errorf makes an *Error with a status, a code and a sentence.
func Errorf(status int, code commands.Code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Unavailable is a 503 with Retry-After: 1 and a code.
func Unavailable(code commands.Code, msg string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: code, Msg: msg, RetryAfter: 1}
}

// WriteError is the one place errors become HTTP answers. Every error body
// carries requestId, the id of the request's log line and of its
// X-Request-Id header; outside the gateway's request log (no Trace) it makes
// one and sets the header itself.
func WriteError(w http.ResponseWriter, r *http.Request, fam Family, err error) {
	e := toError(err)
	var id string
	if t := TraceOf(r); t != nil {
		id, t.Code = t.ID, string(e.Code)
	} else {
		id = ulid.Make().String()
		w.Header().Set(RequestIDHeader, id)
	}
	if e.Status >= 500 && e.Code == "" {
		slog.Error("request failed", "id", id, "route", r.URL.Path, "err", err)
	}
	// The catalogue decides the status and Retry-After of a code: a site
	// cannot answer a status it does not list for the code, nor send
	// Retry-After with a code it does not let carry one.
	status, retryAfter := commands.Answer(e.Code, e.Status, e.RetryAfter)
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	body := map[string]any{}
	for k, v := range e.Extra {
		body[k] = v
	}
	if fam == Venue && e.Code != "" {
		body["error"] = e.Code
		if e.Field != "" {
			body["field"] = e.Field
		}
	} else {
		body["error"] = e.Msg
		if e.Code != "" {
			body["code"] = e.Code
		}
	}
	if e.Params != nil {
		body["params"] = e.Params
	}
	body["requestId"] = id
	WriteJSON(w, status, body)
}

func toError(err error) *Error {
	var he *Error
	var ref *commands.Refusal
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &ref):
		e := &Error{Status: ref.Status(), Code: ref.Code, Msg: ref.Msg, Params: ref.Params, RetryAfter: ref.RetryAfter}
		if f, ok := ref.Params["field"].(string); ok {
			e.Field = f // the venue shape names it at the top level too
		}
		return e
	case errors.Is(err, engine.ErrLogUnavailable):
		return &Error{Status: http.StatusServiceUnavailable, Code: commands.CodeLogUnavailable, RetryAfter: 1,
			Msg: "the commit log is not connected; nothing was recorded; retry with the same id after the Retry-After seconds"}
	case errors.Is(err, engine.ErrOutcomeUnknown):
		return &Error{Status: http.StatusServiceUnavailable, Code: commands.CodeOutcomeUnknown,
			Msg: "the write may or may not have been recorded; read the account stream before retrying with the same id"}
	case errors.Is(err, projections.ErrUnavailable):
		return &Error{Status: http.StatusServiceUnavailable, Code: commands.CodeStoreUnavailable, RetryAfter: 1,
			Msg: "the read models cannot be read right now; nothing was recorded by this read; retry after the Retry-After seconds"}
	case errors.Is(err, projections.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: commands.CodeNotFound, Msg: "not found"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusServiceUnavailable, Code: commands.CodeEngineOverloaded, Msg: "the engine did not answer in time; retry with the same id", RetryAfter: 1}
	}
	return &Error{Status: http.StatusInternalServerError, Msg: "internal error; retry reads with backoff"}
}

// WriteJSON writes v with status, and a newline.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header()["Content-Type"] = jsonContentType
	err := EncodeJSON(v, func(body []byte) {
		w.WriteHeader(status)
		_, _ = w.Write(body)
	})
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(internalErrorBody)
	}
}

// jsonContentType is every JSON answer's Content-Type value, shared rather
// than made for each answer: nothing changes a header's values in place, and
// its capacity is its length, so an Add appends to a copy.
var jsonContentType = []string{"application/json"}[:1:1]

// EncodeJSON encodes v as encoding/json's Marshal writes it (HTML escaped),
// and a newline, at half its CPU (an order's answer and every frame are on
// its path), into a reused buffer, and hands the bytes to use: they are
// valid only during the call. An error writes nothing.
func EncodeJSON(v any, use func([]byte)) error {
	j := jsonBufs.Get().(*jsonBuf)
	defer func() {
		if j.buf.Cap() <= maxJSONBuf {
			jsonBufs.Put(j)
		}
	}()
	j.buf.Reset()
	if err := j.enc.Encode(v); err != nil {
		return err
	}
	use(j.buf.Bytes())
	return nil
}

var internalErrorBody = []byte(`{"error":"internal error"}` + "\n")

// jsonBuf is a buffer answers are encoded into before they are written
// (an error writes none of its bytes), with its encoder: reused, since a
// ResponseWriter copies what it is given.
type jsonBuf struct {
	buf bytes.Buffer
	enc *gojson.Encoder
}

var jsonBufs = sync.Pool{New: func() any {
	j := &jsonBuf{}
	j.enc = gojson.NewEncoder(&j.buf)
	return j
}}

// maxJSONBuf bounds a buffer kept for reuse (a rare large answer's is let go).
const maxJSONBuf = 256 << 10

// NoSniff sets X-Content-Type-Options: nosniff on every answer of next, so
// no browser reads an answer as another type than it says.
func NoSniff(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// DefaultBodyLimit bounds request bodies of routes that set no limit of their own.
const DefaultBodyLimit = 64 << 10

// MaxDepth bounds the nesting of arrays and objects in a JSON request body.
const MaxDepth = 32

// Decode reads a JSON request body into v strictly: application/json only
// (415), at most limit bytes (413), valid UTF-8 throughout, nested at most
// MaxDepth deep, no unknown fields and no trailing data (400). The UTF-8 and
// depth checks run over the bytes before any decoding: encoding/json would
// turn invalid UTF-8 into U+FFFD (two different keys into one).
// An empty body decodes as {}.
func Decode(r *http.Request, v any, limit int64) error {
	if limit <= 0 {
		limit = DefaultBodyLimit
	}
	ct := r.Header.Get("Content-Type")
	mt, err := "application/json", error(nil)
	if ct != mt { // the type as most clients send it, without parsing it (and making its parameters' map)
		mt, _, err = mime.ParseMediaType(ct)
	}
	if err != nil || mt != "application/json" {
		if r.ContentLength == 0 && r.Header.Get("Content-Type") == "" {
			mt = "application/json"
		} else {
			return Errorf(http.StatusUnsupportedMediaType, commands.CodeUnsupportedMediaType, "send Content-Type: application/json")
		}
	}
	buf := bodyBufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxBodyBuf {
			bodyBufs.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1)); err != nil {
		return Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "could not read the request body")
	}
	body := buf.Bytes()
	if int64(len(body)) > limit {
		return Errorf(http.StatusRequestEntityTooLarge, commands.CodeBodyTooLarge, "the request body is over %d bytes", limit)
	}
	if !utf8.Valid(body) {
		return Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "the body is not valid UTF-8")
	}
	if tooDeep(body, MaxDepth) {
		return Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "the body nests arrays and objects more than %d deep", MaxDepth)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	d := decoders.Get().(*decoder)
	base := d.fed // where body begins in what the decoder has read
	d.r.Reset(body)
	if err := d.dec.Decode(v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			se.Offset -= base
		}
		return Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "malformed JSON body: %s", describe(err))
	}
	if len(bytes.TrimSpace(body[d.dec.InputOffset()-base:])) > 0 {
		return Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "malformed JSON body: trailing data after the object")
	}
	if d.fed <= maxDecodeFed {
		decoders.Put(d)
	}
	return nil
}

// decoder is a strict JSON decoder (unknown fields refused) reused across
// requests, with the reader it reads bodies from: a json.Decoder and its
// buffer are most of what a request's decoding allocates. A decoder goes
// back to the pool only after a value decoded cleanly with nothing but
// whitespace after it, so what it holds of its last body is whitespace,
// which the next value skips; a failed one (its error sticks) is dropped.
type decoder struct {
	r   bytes.Reader
	dec *json.Decoder
	fed int64 // the bytes the decoder has read, over all its bodies
}

func (d *decoder) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.fed += int64(n)
	return n, err
}

var decoders = sync.Pool{New: func() any {
	d := &decoder{}
	d.dec = json.NewDecoder(d)
	d.dec.DisallowUnknownFields()
	return d
}}

// maxDecodeFed retires a decoder after this many bytes (its buffer keeps
// the size of the largest body it read).
const maxDecodeFed = 1 << 30

// bodyBufs are the buffers request bodies are read into: the decoder
// copies what it reads into its own, so a buffer is reused once Decode returns.
var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxBodyBuf bounds a buffer kept for reuse.
const maxBodyBuf = DefaultBodyLimit + 1

// tooDeep reports whether the JSON in b opens arrays and objects more than max
// deep, in one pass that skips strings. It does not validate: a stray closer
// only lowers the count to zero, and the decoder refuses the syntax.
func tooDeep(b []byte, max int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > max {
				return true
			}
		case (c == ']' || c == '}') && depth > 0:
			depth--
		}
	}
	return false
}

func describe(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s", te.Field, te.Type.String())
	case errors.Is(err, events.ErrBadDecimal):
		return "a number field is not a finite decimal"
	}
	return err.Error()
}

// Handler is an http handler that returns its error for the family's writer.
type Handler func(w http.ResponseWriter, r *http.Request) error

// Serve adapts h to http.Handler, writing errors in the family's shape.
func Serve(fam Family, h Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			WriteError(w, r, fam, err)
		}
	})
}
