package trading_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

// A write that records something says its log sequence in X-Engine-Seq (a
// refusal records nothing and says none); a read with X-Engine-After at or
// below what the node's read models show is served, and an unreadable value
// or one past the log's last sequence (which no node gave) is 400 naming the
// header, at once.
func TestWritesSayTheirSequenceAndReadsWaitForOne(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	r := e.Post("/api/trading/order", map[string]any{"clientOrderId": "seq-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"})
	if r.Status != http.StatusOK {
		t.Fatalf("order: %d %s", r.Status, r.Body)
	}
	seq, err := strconv.ParseUint(r.Header.Get("X-Engine-Seq"), 10, 64)
	if err != nil || seq == 0 {
		t.Fatalf("the order's answer says X-Engine-Seq %q", r.Header.Get("X-Engine-Seq"))
	}
	again := e.Post("/api/trading/order", map[string]any{"clientOrderId": "seq-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"})
	if again.Status != http.StatusConflict || again.Header.Get("X-Engine-Seq") != "" {
		t.Fatalf("a refused repeat: %d, X-Engine-Seq %q", again.Status, again.Header.Get("X-Engine-Seq"))
	}
	read := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/orders", Headers: map[string]string{"X-Engine-After": strconv.FormatUint(seq, 10)}})
	if read.Status != http.StatusOK {
		t.Fatalf("read after %d: %d %s", seq, read.Status, read.Body)
	}
	for _, bad := range []string{"x", "-1", "99999999999999999999999", strconv.FormatUint(seq+1000, 10)} { // the last: past the log's end, refused at once
		r := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/orders", Headers: map[string]string{"X-Engine-After": bad}})
		if r.Status != http.StatusBadRequest {
			t.Fatalf("X-Engine-After %q: %d %s", bad, r.Status, r.Body)
		}
	}
}
