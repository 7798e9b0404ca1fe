package binance_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/binance"
	binancesim "github.com/svc/engine/sim/binance"
)

// BenchmarkPlace measures one limit order placed through the adapter
// against the simulator beside the same request signed and sent by hand,
// alternating so both meet the same simulator state (its cost grows with
// the orders it holds). It reports both latencies and their difference,
// adapter-ns/op: what the adapter adds (the library, the budget, decoding
// into the engine's types).
func BenchmarkPlace(b *testing.B) {
	big := binancesim.Options{WeightLimit: 1 << 30, OrderLimit1m: 1 << 30, OrderLimit10s: 1 << 30}
	lim := binance.Limits{WeightPerMinute: 1 << 30, OrdersPerMinute: 1 << 30, OrdersPer10s: 1 << 30}
	e := newEnv(b, big, lim)
	s := e.link(b, binancesim.Account{APIKey: "bench", Balances: map[string]string{"USDT": "1000000000"}})
	ctx := context.Background()
	c := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	raw := func(i int) {
		q := url.Values{}
		q.Set("symbol", "BTCUSDT")
		q.Set("side", "BUY")
		q.Set("type", "LIMIT")
		q.Set("timeInForce", "GTC")
		q.Set("quantity", "0.004")
		q.Set("price", "30000")
		q.Set("newClientOrderId", provider.ClientOrderID("raw", strconv.Itoa(i)))
		q.Set("newOrderRespType", "RESULT")
		q.Set("timestamp", strconv.FormatInt(time.Now().UnixMilli(), 10))
		body := q.Encode()
		mac := hmac.New(sha256.New, []byte("secret-of-bench"))
		mac.Write([]byte(body))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.sim.URL()+"/fapi/v1/order?signature="+hex.EncodeToString(mac.Sum(nil)), strings.NewReader(body))
		req.Header.Set("X-MBX-APIKEY", "bench")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("raw: HTTP %d", resp.StatusCode)
		}
	}
	var viaAdapter, byHand time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if _, err := s.Place(ctx, limit(fmt.Sprint("b-", i), provider.Buy, "0.004", "30000")); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		raw(i)
		viaAdapter += t1.Sub(t0)
		byHand += time.Since(t1)
	}
	n := time.Duration(b.N)
	b.Logf("per order: through the adapter %s, signed by hand %s, the adapter's share %s",
		viaAdapter/n, byHand/n, (viaAdapter-byHand)/n)
}
