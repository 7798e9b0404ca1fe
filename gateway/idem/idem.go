// Package idem is the gateway's half of the Idempotency-Key discipline of
// venue-platform and Connect-link writes: Require refuses a write without a
// key (400 idempotency_key_required, nothing recorded) and puts the key and a
// digest of the request (method, path and query, credential, body) in the
// request; Envelope hands both to the command; Serve answers a committed
// write with the answer its aggregate recorded, and a repeat with the same
// answer (engine/idem keeps the record, in the write's commit).
package idem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	evidem "github.com/svc/engine/events/idem"
	"github.com/svc/engine/gateway/httpx"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// MaxKey bounds a key (the spec's limits table).
const MaxKey = 128

// ReplayedHeader marks an answer given again for a repeated key.
const ReplayedHeader = "Idempotent-Replayed"

type ctxKey struct{}

type keyed struct {
	key, digest string
	body        []byte
}

// Required is the refusal of a write without a usable key.
func Required() *httpx.Error {
	return &httpx.Error{Status: http.StatusBadRequest, Code: commands.CodeIdempotencyKeyRequired, Field: Header,
		Msg: "this write needs an Idempotency-Key header of 1 to 128 printable characters; send the same key to retry it safely"}
}

func usable(k string) bool {
	if len(k) == 0 || len(k) > MaxKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// Require admits a write only with a usable Idempotency-Key and records the
// key and the request's digest for Envelope. Reads pass untouched. It runs
// after the credential middleware: the digest names the credential.
func Require(fam httpx.Family) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				next.ServeHTTP(w, r)
				return
			}
			key := r.Header.Get(Header)
			if !usable(key) {
				httpx.WriteError(w, r, fam, Required())
				return
			}
			body, err := io.ReadAll(io.LimitReader(r.Body, httpx.DefaultBodyLimit+1))
			if err != nil {
				httpx.WriteError(w, r, fam, httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "could not read the request body"))
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			p, _ := httpx.PrincipalOf(r)
			ctx := context.WithValue(r.Context(), ctxKey{}, keyed{key: key, digest: Digest(r.Method, r.URL.RequestURI(), credential(p), body), body: body})
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

func credential(p httpx.Principal) string {
	switch {
	case p.UserID != "":
		return "user:" + p.UserID
	case p.KeyID != "":
		return "key:" + p.KeyID
	}
	return "tenant:" + p.TenantID
}

// Digest is the request's digest: SHA-256 over method, path with query,
// credential and the body (JSON compacted, so whitespace does not count).
func Digest(method, uri, credential string, body []byte) string {
	var c bytes.Buffer
	if json.Compact(&c, body) != nil {
		c.Reset()
		c.Write(body)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(method), []byte(uri), []byte(credential), c.Bytes()} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Envelope puts the request's key and digest in env.
func Envelope(r *http.Request, env commands.Envelope) commands.Envelope {
	if k, ok := r.Context().Value(ctxKey{}).(keyed); ok {
		env.Key, env.Digest = k.key, k.digest
	}
	return env
}

// Body is the keyed write's body as it came (nil outside Require).
func Body(r *http.Request) []byte {
	k, _ := r.Context().Value(ctxKey{}).(keyed)
	return k.body
}

// Key is the request's Idempotency-Key ("" outside Require).
func Key(r *http.Request) string {
	k, _ := r.Context().Value(ctxKey{}).(keyed)
	return k.key
}

// Handler is a keyed write: it runs its command and returns the commit's
// events, or an error.
type Handler func(w http.ResponseWriter, r *http.Request) ([]events.Event, error)

// Serve answers a keyed write: the answer the commit recorded (its status and
// body), or for a repeat of the key with the same request the first answer
// again, with Idempotent-Replayed: true; errors in the family's shape.
// Answers are never cached.
func Serve(fam httpx.Family, h Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		evs, err := h(w, r)
		if rp, ok := AsReplay(err); ok {
			WriteReplay(w, rp)
			return
		}
		if err != nil {
			httpx.WriteError(w, r, fam, err)
			return
		}
		status, body, ok := Answer(evs)
		if !ok {
			httpx.WriteError(w, r, fam, errors.New("idem: a keyed write committed no answer"))
			return
		}
		write(w, status, body)
	})
}

// AsReplay finds the aggregate's replay of a repeated key in err.
func AsReplay(err error) (*commands.Replay, bool) {
	var r *commands.Replay
	ok := errors.As(err, &r)
	return r, ok
}

// Answer is the answer a committed keyed write recorded, from its events.
func Answer(evs []events.Event) (status int, body []byte, ok bool) {
	for _, e := range evs {
		if k, is := e.(evidem.KeyUsed); is {
			return k.Status, k.Body, true
		}
	}
	return 0, nil, false
}

// WriteAdding answers a keyed write (evs and err as its command answered)
// whose recorded answer lacks what the log never holds: always goes into
// the first answer and every replay (a URL derived from the write), first
// into the first answer only (a secret shown once). Answers are never cached.
func WriteAdding(w http.ResponseWriter, evs []events.Event, err error, always, first map[string]any) error {
	w.Header().Set("Cache-Control", "no-store")
	rp, replayed := AsReplay(err)
	if !replayed && err != nil {
		return err
	}
	if replayed && len(always) == 0 {
		WriteReplay(w, rp)
		return nil
	}
	status, body := 0, []byte(nil)
	if replayed {
		status, body = rp.Status, rp.Body
	} else {
		var ok bool
		if status, body, ok = Answer(evs); !ok {
			return errors.New("idem: a keyed write committed no answer")
		}
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return err
	}
	for k, v := range always {
		m[k] = v
	}
	if replayed {
		w.Header().Set(ReplayedHeader, "true")
	} else {
		for k, v := range first {
			m[k] = v
		}
	}
	httpx.WriteJSON(w, status, m)
	return nil
}

// WriteReplay answers a repeated key with the first answer, marked Idempotent-Replayed.
func WriteReplay(w http.ResponseWriter, rp *commands.Replay) {
	w.Header().Set(ReplayedHeader, "true")
	write(w, rp.Status, rp.Body)
}

func write(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n"))
}
