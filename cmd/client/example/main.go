// Command example is a small program on the generated Go client (package
// client beside it): it places an order with a clientOrderId, sends the same
// order again as a client does when an answer is lost, settles the outcome by
// reading the account's orders back, and follows the account stream, folded
// by revision, until a frame shows the order's fill.
//
//	go run ./cmd/client/example                    # the engine of `go run ./cmd/engine`, with its data/dev-credentials.json
//	go run ./cmd/client/example -url http://127.0.0.1:8080 -key svc_sk_...
//
// The clientOrderId is the order's idempotency key. Whatever becomes of an
// answer (lost on the way, 503 outcome_unknown, 429), the same request with
// the same clientOrderId is safe to send again: the engine places the order
// once and answers any repeat with 409 idempotency_conflict, naming the order
// that stands in params.brokerOrderId. Before sending again after an unknown
// outcome, the program reads back (GET /api/account/orders): the order may
// stand already.
//
// The account stream (GET /api/account/stream) sends the whole account as a
// frame on connect and on every change, each with its revision; a client
// keeps the frame of the highest revision it has seen (Fold). A market order
// fills at once, so its frame shows it as the position it changed (the
// frame's orders are the working ones).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/svc/engine/cmd/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		slog.Error("exit", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("example", flag.ContinueOnError)
	creds := fs.String("credentials", "data/dev-credentials.json", "the sandbox's credentials file, read when -key is empty")
	base := fs.String("url", "", "the engine's base URL (default: the credentials file's baseUrl, else http://127.0.0.1:8080)")
	key := fs.String("key", "", "a Trading API key, svc_sk_...")
	instrument := fs.String("instrument", "BTC-PERP", "what to buy")
	quantity := fs.String("quantity", "0.01", "how much, a decimal string")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *key == "" {
		var c struct {
			TradingKey string `json:"tradingKey"`
			BaseURL    string `json:"baseUrl"`
		}
		b, err := os.ReadFile(*creds)
		if err != nil {
			return fmt.Errorf("no -key, and %w", err)
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("%s: %w", *creds, err)
		}
		*key = c.TradingKey
		if *base == "" {
			*base = c.BaseURL
		}
	}
	if *base == "" {
		*base = "http://127.0.0.1:8080"
	}
	c, err := client.NewClientWithResponses(*base, client.WithRequestEditorFn(bearer(*key)))
	if err != nil {
		return err
	}

	var qty client.DecimalIn
	if err := qty.FromDecimalIn0(*quantity); err != nil { // a decimal string: never a float
		return err
	}
	order := client.PlaceOrder{ClientOrderId: newClientOrderID(), Instrument: *instrument,
		Side: client.PlaceOrderSideBuy, OrderType: client.PlaceOrderOrderTypeMarket, Quantity: qty}

	// The stream first: its frame on connect is the account before the order.
	streamCtx, closeStream := context.WithCancel(ctx)
	defer closeStream()
	stream, err := OpenStream(streamCtx, c, nil)
	if err != nil {
		return err
	}
	var fold Fold
	if err := within(ctx, 10*time.Second, func(ctx context.Context) error {
		return fold.Until(ctx, stream, func(client.AccountFrame) bool { return true })
	}); err != nil {
		return err
	}
	connected := fold.Held.Revision
	before, err := Net(fold.Held, *instrument)
	if err != nil {
		return err
	}

	placed, err := Place(ctx, c, order)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "placed %s as %s: %s\n", placed.ClientOrderId, placed.BrokerOrderId, describe(placed))

	// The same order again, as after an answer that never arrived: the engine
	// places nothing new, and Place settles on the order that stands.
	again, err := Place(ctx, c, order)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sent %s again: the order that stands is %s, %s\n", again.ClientOrderId, again.BrokerOrderId, describe(again))
	if again.BrokerOrderId != placed.BrokerOrderId {
		return fmt.Errorf("the retry of %s stands as %s, the first answer named %s", order.ClientOrderId, again.BrokerOrderId, placed.BrokerOrderId)
	}

	// Fold the stream until the held frame shows the fill: the position it
	// had on connect plus the order's filled quantity.
	want, err := afterFill(before, placed)
	if err != nil {
		return err
	}
	if err := within(ctx, 10*time.Second, func(ctx context.Context) error {
		return fold.Until(ctx, stream, func(f client.AccountFrame) bool {
			net, err := Net(f, *instrument)
			return err == nil && net.Cmp(want) == 0
		})
	}); err != nil {
		return fmt.Errorf("no frame shows %s %s: %w", *instrument, position(want), err)
	}
	fmt.Fprintf(out, "the account stream, folded by revision: revision %d (%d on connect, %s) holds %s %s, the fill of %s\n",
		fold.Held.Revision, connected, position(before), *instrument, position(want), placed.ClientOrderId)
	return nil
}

// within runs fn with a deadline of d.
func within(ctx context.Context, d time.Duration, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return fn(ctx)
}

// Place places o and returns the order that stands for its clientOrderId,
// sending it again (same clientOrderId) while the outcome is unknown or the
// engine asks to retry, and reading back before each new attempt. Any other
// refusal is an *Error.
func Place(ctx context.Context, c *client.ClientWithResponses, o client.PlaceOrder) (client.Order, error) {
	const attempts = 5
	var last error
	for attempt := 1; attempt <= attempts; attempt++ {
		if attempt > 1 {
			// Settle the previous attempt first: it may have placed the order.
			if got, found, err := ReadBack(ctx, c, o.ClientOrderId); err == nil && found {
				return got, sameOrder(got, o)
			}
		}
		resp, err := c.PlaceOrderWithResponse(ctx, nil, o)
		wait := time.Duration(attempt) * 200 * time.Millisecond
		switch {
		case err != nil: // no answer: placed or not, the read-back will tell
			last = err
		case resp.JSON200 != nil:
			return resp.JSON200.Order, nil
		default:
			e := refusal(resp.HTTPResponse, resp.Body)
			switch {
			case e.Code == "idempotency_conflict": // an earlier attempt placed it (or another order used the id)
				got, found, err := ReadBack(ctx, c, o.ClientOrderId)
				if err != nil {
					return client.Order{}, err
				}
				if !found {
					return client.Order{}, fmt.Errorf("%w, yet no order reads back with it", e)
				}
				return got, sameOrder(got, o)
			case e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable:
				last = e // outcome_unknown, engine_overloaded, log_unavailable ...: read back, then again
				if e.RetryAfter > 0 {
					wait = e.RetryAfter
				}
			default:
				return client.Order{}, e
			}
		}
		select {
		case <-ctx.Done():
			return client.Order{}, ctx.Err()
		case <-time.After(wait):
		}
	}
	return client.Order{}, fmt.Errorf("order %s: no outcome after %d attempts: %w", o.ClientOrderId, attempts, last)
}

// ReadBack finds the order of a clientOrderId among the account's newest 500
// orders of every state.
func ReadBack(ctx context.Context, c *client.ClientWithResponses, clientOrderID string) (client.Order, bool, error) {
	all, limit := client.ListOrdersParamsStateAll, 500
	resp, err := c.ListOrdersWithResponse(ctx, &client.ListOrdersParams{State: &all, Limit: &limit})
	if err != nil {
		return client.Order{}, false, err
	}
	if resp.JSON200 == nil {
		return client.Order{}, false, refusal(resp.HTTPResponse, resp.Body)
	}
	for _, o := range resp.JSON200.Orders {
		if o.ClientOrderId == clientOrderID {
			return o, true, nil
		}
	}
	return client.Order{}, false, nil
}

// Error is a refusal of the engine: its status, stable code, sentence and
// the request id to quote when reporting it.
type Error struct {
	Status     int
	Code       string
	Msg        string
	RequestID  string
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s (request %s)", e.Status, e.Code, e.Msg, e.RequestID)
}

func refusal(r *http.Response, body []byte) *Error {
	var b client.ErrorResponse
	_ = json.Unmarshal(body, &b)
	e := &Error{Status: r.StatusCode, Msg: b.Error, RequestID: b.RequestId}
	if b.Code != nil {
		e.Code = string(*b.Code)
	}
	if e.RequestID == "" {
		e.RequestID = r.Header.Get("X-Request-Id")
	}
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// sameOrder reports an order that stands for o's clientOrderId but is
// another order: the id was used before, for something else.
func sameOrder(got client.Order, o client.PlaceOrder) error {
	if got.Instrument != o.Instrument || string(got.Side) != string(o.Side) || string(got.OrderType) != string(o.OrderType) {
		return fmt.Errorf("clientOrderId %s was used before for another order (%s)", o.ClientOrderId, got.BrokerOrderId)
	}
	return nil
}

func describe(o client.Order) string {
	s := fmt.Sprintf("%s %s %s %s", o.State, o.Side, o.Quantity, o.Instrument)
	if o.AvgFillPrice != nil {
		s += " at " + *o.AvgFillPrice
	}
	return s
}

// newClientOrderID makes an id no earlier run used, so the program can run
// again and again.
func newClientOrderID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "example-" + hex.EncodeToString(b)
}

func bearer(key string) client.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		if key == "" {
			return errors.New("no Trading API key")
		}
		r.Header.Set("Authorization", "Bearer "+key)
		return nil
	}
}
