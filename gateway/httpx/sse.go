package httpx

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"
)

// Heartbeat is the interval of SSE comment heartbeats.
var Heartbeat = 15 * time.Second

// SSE writes one server-sent event stream.
type SSE struct {
	w http.ResponseWriter
	f http.Flusher
}

// StartSSE sends the stream's headers; it fails when the writer cannot flush.
func StartSSE(w http.ResponseWriter) (*SSE, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, Errorf(http.StatusInternalServerError, "", "streaming unsupported")
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &SSE{w: w, f: f}, nil
}

// FormatEvent renders one event with a name, an optional id and data, as the
// bytes a stream writes; a hub renders a frame once for all its subscribers.
func FormatEvent(name, id string, data []byte) []byte {
	b := make([]byte, 0, len(data)+64)
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	if id != "" {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		b = append(append(append(b, "data: "...), line...), '\n')
	}
	return append(b, '\n')
}

// Event writes one event with a name, an optional id and JSON data, and flushes.
func (s *SSE) Event(name, id string, data []byte) error {
	if _, err := s.w.Write(FormatEvent(name, id, data)); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// Write writes rendered events without flushing; Flush sends them.
func (s *SSE) Write(b []byte) error {
	_, err := s.w.Write(b)
	return err
}

// Flush sends what was written.
func (s *SSE) Flush() { s.f.Flush() }

// Comment writes a comment line (a heartbeat) and flushes.
func (s *SSE) Comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// Pump runs a stream until the client goes (ctx), the server drains (done), in
// closes or a write fails: a heartbeat comment every Heartbeat, and send for
// each value from in. The stream's end is never an error to report.
func Pump[T any](ctx context.Context, s *SSE, done <-chan struct{}, in <-chan T, send func(T) error) error {
	beat := time.NewTicker(Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return nil
		case <-beat.C:
			if s.Comment("heartbeat") != nil {
				return nil
			}
		case v, ok := <-in:
			if !ok || send(v) != nil {
				return nil
			}
		}
	}
}
