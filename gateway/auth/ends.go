package auth

import (
	"sync"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// CredentialEnded is the code of a stream's final `error` event when the
// credential that opened it ends: a key revoked or expired, a session ended
// (logout, a password reset) or expired. The client does not reconnect with
// that credential.
const CredentialEnded = commands.CodeCredentialRevoked

// goneFor is how long an ended credential is remembered, for a stream
// admitted after its credential was read live but before the end was heard.
const goneFor = 2 * time.Minute

// maxGone bounds the ended credentials remembered.
const maxGone = 1 << 16

// ends indexes the open streams by the credential that opened them, so that
// the end of a credential, heard from the log every node folds (OnCommit),
// ends its streams on every node.
type ends struct {
	mu   sync.Mutex
	by   map[string]map[*httpx.StreamEnd]struct{} // endOf.ref -> the streams it opened
	gone map[string]gone                          // endOf.ref -> its end, heard lately
}

type gone struct {
	err *httpx.Error
	at  time.Time
}

// endOf is what names what ends a principal's streams (ref): its kind,
// session and key.
type endOf struct{ kind, session, keyID string }

// ref names what ends the principal's streams: its key or its session; ""
// for a registered origin, which nothing revokes.
func (e endOf) ref() string {
	switch e.kind {
	case "origin":
		return ""
	case "session", "dashboard":
		return "session:" + e.session
	}
	return "key:" + e.keyID
}

// OnCommit is the projector listener that ends the streams of every
// credential c ends (projections.EndedBy): their last event is `error` with
// code credential_revoked. It never blocks.
func (a *Auth) OnCommit(c events.Committed) {
	for _, x := range projections.EndedBy(c) {
		if x.KeyID != "" {
			a.endStreams("key:"+x.KeyID, endedErr("the key that opened this stream was revoked; do not reconnect with it", x.Reason))
		} else {
			a.endStreams("session:"+x.SessionID, endedErr("the session that opened this stream ended; sign in again", x.Reason))
		}
	}
}

func endedErr(msg, reason string) *httpx.Error {
	return &httpx.Error{Code: CredentialEnded, Msg: msg, Params: map[string]any{"reason": reason}}
}

// endStreams ends ref's open streams with err, and remembers ref as ended
// for a while (watch).
func (a *Auth) endStreams(ref string, err *httpx.Error) {
	e := &a.ends
	now := time.Now()
	e.mu.Lock()
	if len(e.gone) >= maxGone {
		for k, g := range e.gone {
			if now.Sub(g.at) > goneFor || len(e.gone) >= maxGone {
				delete(e.gone, k)
			}
		}
	}
	e.gone[ref] = gone{err: err, at: now}
	streams := e.by[ref]
	delete(e.by, ref)
	e.mu.Unlock()
	for s := range streams {
		s.End(err)
	}
}

// watch makes end end when ref ends, or at until (not zero) as an expiry;
// at once if ref ended lately. stop forgets it.
func (a *Auth) watch(ref string, until time.Time, end *httpx.StreamEnd) (stop func()) {
	if ref == "" {
		return func() {}
	}
	e := &a.ends
	e.mu.Lock()
	if g, ok := e.gone[ref]; ok && time.Since(g.at) <= goneFor {
		e.mu.Unlock()
		end.End(g.err)
		return func() {}
	}
	m := e.by[ref]
	if m == nil {
		m = map[*httpx.StreamEnd]struct{}{}
		e.by[ref] = m
	}
	m[end] = struct{}{}
	e.mu.Unlock()
	var t *time.Timer
	if !until.IsZero() {
		t = time.AfterFunc(time.Until(until), func() {
			end.End(endedErr("the credential that opened this stream expired; do not reconnect with it", "expired"))
		})
	}
	return func() {
		if t != nil {
			t.Stop()
		}
		e.mu.Lock()
		if m := e.by[ref]; m != nil {
			delete(m, end)
			if len(m) == 0 {
				delete(e.by, ref)
			}
		}
		e.mu.Unlock()
	}
}
