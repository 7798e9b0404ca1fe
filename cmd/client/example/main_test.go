package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svc/engine/cmd/client"
	"github.com/svc/engine/cmd/engine/app/apptest"
)

// The example runs against a real engine: it places one order, its repeat
// settles on the same order, and the account holds that order once.
func TestTheExampleAgainstAnEngine(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", e.URL, "-key", e.Key}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "placed example-") || !strings.Contains(lines[0], "filled buy 0.01 BTC-PERP at ") ||
		!strings.Contains(lines[1], "again: the order that stands is") {
		t.Fatalf("output:\n%s", out.String())
	}
	if n := examples(t, e); n != 1 {
		t.Fatalf("%d example orders on the account, want 1", n)
	}
	// Run twice, it places a second order: each run has its own clientOrderId.
	if err := run(context.Background(), []string{"-url", e.URL, "-key", e.Key}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if n := examples(t, e); n != 2 {
		t.Fatalf("%d example orders after two runs, want 2", n)
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
