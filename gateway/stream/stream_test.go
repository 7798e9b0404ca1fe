package stream_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/stream"
)

// open opens the account stream over HTTP/1.1 and returns its body.
func open(t *testing.T, e *apptest.Env) io.ReadCloser {
	t.Helper()
	req, _ := http.NewRequest("GET", e.URL+"/api/account/stream", nil)
	req.Header.Set("Authorization", "Bearer "+e.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp.Body
}

type event struct{ name, id, data string }

// next reads the next event, or the next comment when comments is true.
func next(t *testing.T, br *bufio.Reader, comments bool) event {
	t.Helper()
	var ev event
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && ev != (event{}):
			return ev
		case strings.HasPrefix(line, ": ") && comments:
			return event{name: line}
		case strings.HasPrefix(line, "event: "):
			ev.name = line[7:]
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

func TestServedStreamEndsCleanlyOnDrain(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	body := open(t, e)
	br := bufio.NewReader(body)
	if ev := next(t, br, false); ev.name != "account" || ev.id == "" {
		t.Fatalf("first event %+v", ev)
	}
	e.App.Hub.Close()
	if _, err := io.ReadAll(br); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
	apptest.WaitFor(t, 5*time.Second, func() error {
		if n := e.App.Hub.Subscribers(); n != 0 {
			return fmt.Errorf("%d subscribers", n)
		}
		return nil
	})
}

func TestServedStreamEndsWhenTheClientGoes(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	body := open(t, e)
	if ev := next(t, bufio.NewReader(body), false); ev.name != "account" {
		t.Fatalf("first event %+v", ev)
	}
	body.Close()
	apptest.WaitFor(t, 5*time.Second, func() error {
		if n := e.App.Hub.Subscribers(); n != 0 {
			return fmt.Errorf("%d subscribers", n)
		}
		return nil
	})
}

func TestServedStreamHeartbeats(t *testing.T) {
	was := httpx.Heartbeat
	httpx.Heartbeat = 30 * time.Millisecond
	t.Cleanup(func() { httpx.Heartbeat = was })
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	br := bufio.NewReader(open(t, e))
	for range 3 {
		for {
			if ev := next(t, br, true); ev.name == ": heartbeat" {
				break
			}
		}
	}
}

// A subscriber that does not read fills its socket: it must not hold back
// another subscriber, and once it reads it gets the newest frame, not the backlog.
func TestStuckServedSubscriberGetsNewestOnly(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	id := e.Accounts[0].AccountID
	stuck, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stuck.Close() })
	fmt.Fprintf(stuck, "GET /api/account/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", e.Key)
	fast := bufio.NewReader(open(t, e))
	first := next(t, fast, false)
	apptest.WaitFor(t, 5*time.Second, func() error {
		if n := e.App.Hub.Subscribers(); n != 2 {
			return fmt.Errorf("%d subscribers", n)
		}
		return nil
	})
	rev0, _ := strconv.ParseUint(first.id, 10, 64)
	data := []byte(`"` + strings.Repeat("x", 256<<10) + `"`)
	const sends = 80 // 20 MiB, more than loopback socket buffers hold
	last := strconv.FormatUint(rev0+sends, 10)
	for i := uint64(1); i <= sends; i++ {
		e.App.Hub.Send(id, stream.Payload{Name: "account", ID: strconv.FormatUint(rev0+i, 10), Data: data, Rev: rev0 + i})
		if i%10 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for ev := next(t, fast, false); ev.id != last; ev = next(t, fast, false) {
		if time.Now().After(deadline) {
			t.Fatal("the reading subscriber did not get the newest frame")
		}
	}

	resp, err := http.ReadResponse(bufio.NewReader(stuck), nil)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	var got []string
	for ev := next(t, br, false); ; ev = next(t, br, false) {
		if ev.name == "account" {
			got = append(got, ev.id)
		}
		if ev.id == last {
			break
		}
	}
	if len(got) > sends/2 {
		t.Fatalf("the stuck subscriber got a backlog of %d of %d frames", len(got), sends)
	}
	for i := 1; i < len(got); i++ {
		a, _ := strconv.Atoi(got[i-1])
		b, _ := strconv.Atoi(got[i])
		if b <= a {
			t.Fatalf("revisions went back: %v", got)
		}
	}
}

// HTTP/1.0 cannot be detached (no chunked body): it is pumped as before.
func TestHTTP10StreamIsPumped(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	c, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /api/account/stream HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n", e.Key)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.TransferEncoding) != 0 {
		t.Fatalf("transfer encoding %v", resp.TransferEncoding)
	}
	br := bufio.NewReader(resp.Body)
	if ev := next(t, br, false); ev.name != "account" {
		t.Fatalf("first event %+v", ev)
	}
	e.App.Hub.Close()
	if b, err := io.ReadAll(br); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read: %v", err)
	} else if bytes.Contains(b, []byte("0\r\n\r\n")) {
		t.Fatal("chunk framing on an HTTP/1.0 stream")
	}
}
