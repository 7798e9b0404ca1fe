package httpx

import (
	"fmt"
	"net/http"
	"strings"
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

// Event writes one event with a name, an optional id and JSON data, and flushes.
func (s *SSE) Event(name, id string, data []byte) error {
	var b strings.Builder
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	for _, line := range strings.Split(string(data), "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	if _, err := fmt.Fprint(s.w, b.String()); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// Comment writes a comment line (a heartbeat) and flushes.
func (s *SSE) Comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}
