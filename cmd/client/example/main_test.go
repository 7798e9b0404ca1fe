package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/cmd/client"
	"github.com/svc/engine/cmd/engine/app/apptest"
)

// The example runs against a real engine: it places one order, its repeat
// settles on the same order, the account holds that order once, and the
// stream folded by revision shows its fill in a frame newer than the one on
// connect.
func TestTheExampleAgainstAnEngine(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	for i, want := range []struct{ before, after string }{{"flat", "long 0.01"}, {"long 0.01", "long 0.02"}} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"-url", e.URL, "-key", e.Key}, &out); err != nil {
			t.Fatalf("run %d: %v\n%s", i+1, err, out.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "placed example-") || !strings.Contains(lines[0], "filled buy 0.01 BTC-PERP at ") ||
			!strings.Contains(lines[1], "again: the order that stands is") {
			t.Fatalf("run %d output:\n%s", i+1, out.String())
		}
		coid := strings.Fields(lines[0])[1]
		m := regexp.MustCompile(`^the account stream, folded by revision: revision (\d+) \((\d+) on connect, (.+)\) holds BTC-PERP (.+), the fill of (\S+)$`).
			FindStringSubmatch(lines[2])
		if m == nil || m[3] != want.before || m[4] != want.after || m[5] != coid {
			t.Fatalf("run %d: the stream line %q, want %s then %s for %s", i+1, lines[2], want.before, want.after, coid)
		}
		held, _ := strconv.Atoi(m[1])
		connected, _ := strconv.Atoi(m[2])
		var snap struct{ Revision int }
		e.Get("/api/account/snapshot").JSON(t, &snap)
		if held <= connected || held != snap.Revision {
			t.Fatalf("run %d: held revision %d, %d on connect, the snapshot's %d", i+1, held, connected, snap.Revision)
		}
		// Each run places its own order: each has its own clientOrderId.
		if n := examples(t, e); n != i+1 {
			t.Fatalf("%d example orders on the account after %d runs", n, i+1)
		}
	}
}

// Fold keeps a frame only when its revision is higher than the held one's.
func TestFoldKeepsTheHighestRevision(t *testing.T) {
	var fd Fold
	for _, tc := range []struct {
		rev, held int
		kept      bool
	}{
		{5, 5, true}, {3, 5, false}, {5, 5, false}, {9, 9, true}, {7, 9, false}, {10, 10, true},
	} {
		f := client.AccountFrame{Revision: tc.rev, AccountId: strconv.Itoa(tc.rev)}
		if kept := fd.Add(f); kept != tc.kept || fd.Held.Revision != tc.held || fd.Held.AccountId != strconv.Itoa(tc.held) {
			t.Fatalf("add %d: kept %v, holding %d; want %v, %d", tc.rev, kept, fd.Held.Revision, tc.kept, tc.held)
		}
	}
	if fd.Kept != 3 || fd.Skipped != 3 {
		t.Fatalf("kept %d, skipped %d", fd.Kept, fd.Skipped)
	}
}

// Against a real engine: every fill gives a newer frame, the fold ends at
// the snapshot's revision, and the first frame of a second connection (the
// same revision, as after a reconnect) is not taken.
func TestFoldFollowsTheEngine(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	c, err := client.NewClientWithResponses(e.URL, client.WithRequestEditorFn(bearer(e.Key)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := OpenStream(ctx, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	var fd Fold
	if err := fd.Until(ctx, s, func(client.AccountFrame) bool { return true }); err != nil {
		t.Fatal(err)
	}
	var qty client.DecimalIn
	if err := qty.FromDecimalIn0("0.01"); err != nil {
		t.Fatal(err)
	}
	revs := []int{fd.Held.Revision}
	for i := 1; i <= 3; i++ {
		o := client.PlaceOrder{ClientOrderId: newClientOrderID(), Instrument: "BTC-PERP", Side: client.PlaceOrderSideBuy,
			OrderType: client.PlaceOrderOrderTypeMarket, Quantity: qty}
		if _, err := Place(ctx, c, o); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("long 0.0%d", i)
		if err := fd.Until(ctx, s, func(f client.AccountFrame) bool {
			n, err := Net(f, "BTC-PERP")
			return err == nil && position(n) == want
		}); err != nil {
			t.Fatalf("order %d: %v", i, err)
		}
		if last := revs[len(revs)-1]; fd.Held.Revision <= last {
			t.Fatalf("order %d held at revision %d after %d", i, fd.Held.Revision, last)
		}
		revs = append(revs, fd.Held.Revision)
	}
	var snap client.AccountFrame
	e.Get("/api/account/snapshot").JSON(t, &snap)
	if fd.Held.Revision != snap.Revision {
		t.Fatalf("held revision %d, the snapshot's %d (revisions %v)", fd.Held.Revision, snap.Revision, revs)
	}

	again, err := OpenStream(ctx, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := <-again.C
	if first.Revision != fd.Held.Revision || fd.Add(first) {
		t.Fatalf("a second connection's first frame at revision %d, held %d: taken", first.Revision, fd.Held.Revision)
	}
}

// A refused stream is an *Error with the engine's code.
func TestOpenStreamReturnsARefusal(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	c, err := client.NewClientWithResponses(e.URL, client.WithRequestEditorFn(bearer(e.Key)))
	if err != nil {
		t.Fatal(err)
	}
	nope := client.Account("NOPE")
	_, err = OpenStream(context.Background(), c, &client.StreamAccountParams{Account: &nope})
	var ref *Error
	if !errors.As(err, &ref) || ref.Status != http.StatusBadRequest || ref.Code == "" || ref.RequestID == "" {
		t.Fatalf("refusal %#v (%v)", ref, err)
	}
}

// Place settles a lost answer by reading back: when the order went through
// it is not sent again, and when the request never arrived it is.
func TestPlaceSettlesALostAnswer(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	for _, tc := range []struct {
		name      string
		arrives   bool // the lost first request reached the engine
		wantPosts int64
	}{
		{"the answer is lost after the engine placed the order", true, 1},
		{"the request is lost before the engine saw it", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lossy := &loseFirstPost{t: t, arrives: tc.arrives}
			c, err := client.NewClientWithResponses(e.URL, client.WithHTTPClient(&http.Client{Transport: lossy}),
				client.WithRequestEditorFn(bearer(e.Key)))
			if err != nil {
				t.Fatal(err)
			}
			var qty client.DecimalIn
			if err := qty.FromDecimalIn0("0.01"); err != nil {
				t.Fatal(err)
			}
			o := client.PlaceOrder{ClientOrderId: newClientOrderID(), Instrument: "BTC-PERP", Side: client.PlaceOrderSideBuy,
				OrderType: client.PlaceOrderOrderTypeMarket, Quantity: qty}
			got, err := Place(context.Background(), c, o)
			if err != nil {
				t.Fatal(err)
			}
			if got.ClientOrderId != o.ClientOrderId || got.State != client.OrderStateFilled {
				t.Fatalf("settled on %+v", got)
			}
			if n := lossy.posts.Load(); n != tc.wantPosts {
				t.Errorf("%d orders sent, want %d", n, tc.wantPosts)
			}
			back, found, err := ReadBack(context.Background(), c, o.ClientOrderId)
			if err != nil || !found || back.BrokerOrderId != got.BrokerOrderId {
				t.Fatalf("read back %+v %v %v", back, found, err)
			}
		})
	}
}

// A refusal is an *Error carrying the code and the request id.
func TestPlaceReturnsARefusal(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	validating := &loseFirstPost{t: t}
	validating.posts.Store(1) // loses nothing
	c, err := client.NewClientWithResponses(e.URL, client.WithHTTPClient(&http.Client{Transport: validating}),
		client.WithRequestEditorFn(bearer(e.Key)))
	if err != nil {
		t.Fatal(err)
	}
	var qty client.DecimalIn
	if err := qty.FromDecimalIn0("0.01"); err != nil {
		t.Fatal(err)
	}
	_, err = Place(context.Background(), c, client.PlaceOrder{ClientOrderId: newClientOrderID(), Instrument: "NOPE",
		Side: client.PlaceOrderSideBuy, OrderType: client.PlaceOrderOrderTypeMarket, Quantity: qty})
	var ref *Error
	if !errors.As(err, &ref) || ref.Status/100 != 4 || ref.Code == "" || len(ref.RequestID) != 26 {
		t.Fatalf("refusal %#v (%v)", ref, err)
	}
}

// loseFirstPost is a transport that loses the first order a client sends:
// after the engine answered it (arrives) or before it sent it. Every answer
// the client reads is validated against schema/openapi.yaml.
type loseFirstPost struct {
	t       *testing.T
	arrives bool
	posts   atomic.Int64
}

func (l *loseFirstPost) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && l.posts.Add(1) == 1 {
		if !l.arrives {
			return nil, errors.New("lost on the way")
		}
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("the answer (%d) was lost on the way", resp.StatusCode)
		}
		return nil, err
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	apptest.ValidateResponse(l.t, r, resp.StatusCode, resp.Header, b)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// examples counts the account's orders the example placed.
func examples(t *testing.T, e *apptest.Env) int {
	t.Helper()
	var got struct {
		Orders []struct {
			ClientOrderID string `json:"clientOrderId"`
		} `json:"orders"`
	}
	e.Get("/api/account/orders?state=all&limit=500").JSON(t, &got)
	n := 0
	for _, o := range got.Orders {
		if strings.HasPrefix(o.ClientOrderID, "example-") {
			n++
		}
	}
	return n
}
