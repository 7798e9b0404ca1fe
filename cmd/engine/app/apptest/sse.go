package apptest

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Event is one server-sent event as a test reads it.
type Event struct {
	Name string
	ID   string
	Data map[string]any
}

// Stream opens an SSE route with the env's key and delivers its events until the
// test ends. The response's status and content type are checked against the
// OpenAPI document.
func (e *Env) Stream(path string) <-chan Event {
	e.T.Helper()
	req, _ := http.NewRequest("GET", e.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { resp.Body.Close() })
	ValidateResponse(e.T, req, resp.StatusCode, resp.Header, nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		e.T.Fatalf("stream %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := make(chan Event, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev Event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.Name = line[7:]
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(line[6:]), &ev.Data)
			case line == "" && ev.Name != "":
				ch <- ev
				ev = Event{}
			}
		}
	}()
	return ch
}

// Next waits up to 10 s for the stream's next event.
func Next(t testing.TB, ch <-chan Event) Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10 s")
	}
	return Event{}
}
