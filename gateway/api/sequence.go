package api

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/gateway/httpx"
)

// Read-your-writes across nodes. Every answer to a write that committed
// carries the commit's log sequence in X-Engine-Seq; a request that sends
// X-Engine-After: N is served only once this node's read models, and its
// state of the aggregates, show the log up to N (at most SettleTimeout,
// then 503 read_models_behind with Retry-After). A client that writes
// through one node and reads through another sends back the newest
// X-Engine-Seq it was given. On one node the credential's own writes are
// waited for without it (CatchUp).
const (
	SeqHeader   = "X-Engine-Seq"
	AfterHeader = "X-Engine-After"
)

type seqKey struct{}

// seqOf is where the newest sequence the request of ctx committed at is
// kept (a handler may commit from several goroutines: a batch): in the
// gateway's state of the request (httpx.CommitSeq), or where Sequenced put
// it for a request without one; nil outside Sequenced.
func seqOf(ctx context.Context) *atomic.Uint64 {
	if h := httpx.CommitSeq(ctx); h != nil {
		return h
	}
	h, _ := ctx.Value(seqKey{}).(*atomic.Uint64)
	return h
}

// raise records seq in h if it is the newest.
func raise(h *atomic.Uint64, seq uint64) {
	for {
		old := h.Load()
		if seq <= old || h.CompareAndSwap(old, seq) {
			return
		}
	}
}

// seqWriter sets X-Engine-Seq before the status goes out.
type seqWriter struct {
	http.ResponseWriter
	h   *atomic.Uint64
	seq [1]string // the header's values
}

func (w *seqWriter) WriteHeader(code int) {
	w.stamp()
	w.ResponseWriter.WriteHeader(code)
}

func (w *seqWriter) Write(b []byte) (int, error) {
	w.stamp()
	return w.ResponseWriter.Write(b)
}

func (w *seqWriter) stamp() {
	if seq := w.h.Load(); seq > 0 && w.Header().Get(SeqHeader) == "" {
		w.seq[0] = strconv.FormatUint(seq, 10)
		w.Header()[SeqHeader] = w.seq[:1:1]
	}
}

// Unwrap lets http.ResponseController reach the connection (streams).
func (w *seqWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes on to the writer beneath.
func (w *seqWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Sequenced is the middleware of both headers (see SeqHeader).
func (d *Deps) Sequenced(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get(AfterHeader); v != "" {
			seq, err := strconv.ParseUint(v, 10, 63)
			if err != nil || len(v) > 19 {
				httpx.WriteError(w, r, httpx.Trading, commands.BadField(AfterHeader, nil,
					"%s must be a log sequence this engine gave in %s (a whole number)", AfterHeader, SeqHeader))
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), SettleTimeout)
			if seq > d.Projector.Applied() {
				// A sequence the log does not hold yet was never given by a
				// node: refused at once, not waited for.
				if last, lerr := d.Engine.LastSeq(ctx); lerr == nil && seq > last {
					cancel()
					httpx.WriteError(w, r, httpx.Trading, commands.BadField(AfterHeader, nil,
						"%s %d is past the log's last sequence %d: send back a %s this engine gave", AfterHeader, seq, last, SeqHeader))
					return
				}
			}
			err = d.Projector.WaitFor(ctx, seq)
			if err == nil {
				// A read of an aggregate's live state (the risk lock) sees
				// seq too: on a node of several it follows the log apart.
				err = d.Engine.Observed(ctx, seq)
			}
			cancel()
			if err != nil && r.Context().Err() == nil {
				httpx.WriteError(w, r, httpx.Trading, httpx.Unavailable(commands.CodeReadModelsBehind,
					"this node's read models have not reached the sequence in "+AfterHeader+" yet; nothing is lost: read again after the Retry-After seconds"))
				return
			}
		}
		h := httpx.CommitSeq(r.Context())
		if h == nil { // a request the gateway's log did not begin (Begin)
			h = new(atomic.Uint64)
			r = r.WithContext(context.WithValue(r.Context(), seqKey{}, h))
		}
		next.ServeHTTP(&seqWriter{ResponseWriter: w, h: h}, r)
	})
}

// committedAt records that the request's write committed at seq (its answer
// then says so in X-Engine-Seq).
func committedAt(r *http.Request, seq uint64) {
	if h := seqOf(r.Context()); h != nil {
		raise(h, seq)
	}
}
