package main_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestAttacksAreRefusedAndTheLogStaysReadable sends the attacks of issue 11
// to the real binary as a holder of one valid key would: every answer is a
// 4xx, the process lives, and after SIGKILL it starts again on the same log
// and still trades.
func TestAttacksAreRefusedAndTheLogStaysReadable(t *testing.T) {
	bin := build(t)
	dir, addr := t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)
	c := readCreds(t, dir)
	var extra struct {
		PartnerKey string `json:"partnerKey"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "dev-credentials.json"))
	_ = json.Unmarshal(b, &extra)

	order := func(coid, typ, field, value string) []byte {
		body := `{"clientOrderId":"` + coid + `","instrument":"BTC-PERP","side":"buy","orderType":"` + typ + `","quantity":`
		switch field {
		case "quantity":
			body += value
		default:
			body += `"0.01","limitPrice":` + value
		}
		return []byte(body + "}")
	}
	// A resting limit order to aim replaces at.
	status, body, err := call(p.base, c.TradingKey, "POST", "/api/trading/order",
		map[string]any{"clientOrderId": "rest-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "limit", "quantity": "0.01", "limitPrice": "1000"})
	if err != nil || status != 200 {
		t.Fatalf("resting order: %d %s %v", status, body, err)
	}
	var rest struct {
		Order struct {
			BrokerOrderID string `json:"brokerOrderId"`
		} `json:"order"`
	}
	_ = json.Unmarshal(body, &rest)

	type attack struct {
		name, method, path, key string
		body                    []byte
	}
	attacks := []attack{
		{"tiny market quantity", "POST", "/api/trading/order", c.TradingKey, order("a1", "market", "quantity", `"1e-100000"`)},
		{"1e-70 limit price", "POST", "/api/trading/order", c.TradingKey, order("a2", "limit", "limitPrice", `"1e-70"`)},
		{"1E+6144 limit price", "POST", "/api/trading/order", c.TradingKey, order("a3", "limit", "limitPrice", `"1E+6144"`)},
		{"1e100000 limit price", "POST", "/api/trading/order", c.TradingKey, order("a4", "limit", "limitPrice", `"1e100000"`)},
		{"39-digit limit price", "POST", "/api/trading/order", c.TradingKey, order("a5", "limit", "limitPrice", `"123456789012345678901234567890123456789"`)},
		{"1e400 JSON number", "POST", "/api/trading/order", c.TradingKey, order("a6", "limit", "limitPrice", `1e400`)},
		{"1e-400 JSON number", "POST", "/api/trading/order", c.TradingKey, order("a7", "limit", "limitPrice", `1e-400`)},
		{"replace to 1e-70", "POST", "/api/trading/replace", c.TradingKey, []byte(`{"brokerOrderId":"` + rest.Order.BrokerOrderID + `","limitPrice":"1e-70"}`)},
		{"replace to 1E+6144", "POST", "/api/trading/replace", c.TradingKey, []byte(`{"brokerOrderId":"` + rest.Order.BrokerOrderID + `","quantity":"1E+6144"}`)},
		{"NUL in clientOrderId", "POST", "/api/trading/order", c.TradingKey, []byte(`{"clientOrderId":"a\u0000b","instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":"0.01"}`)},
		{"ANSI escape in clientOrderId", "POST", "/api/trading/order", c.TradingKey, []byte(`{"clientOrderId":"\u001b[31mred","instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":"0.01"}`)},
		{"invalid UTF-8 in clientOrderId", "POST", "/api/trading/order", c.TradingKey, []byte("{\"clientOrderId\":\"k\xff\",\"instrument\":\"BTC-PERP\",\"side\":\"buy\",\"orderType\":\"market\",\"quantity\":\"0.01\"}")},
		{"deep nesting", "POST", "/api/trading/order", c.TradingKey, bytes.Repeat([]byte("["), 100000)},
	}
	if extra.PartnerKey != "" {
		attacks = append(attacks, attack{"balance credit 1e100000", "POST", "/api/partner/balance-op", extra.PartnerKey,
			[]byte(`{"referenceId":"big-1","accountNumber":"` + c.Accounts[0].AccountNumber + `","op":"credit","amount":"1e100000"}`)})
		for _, u := range []string{"https://127.0.0.1/", "https://localhost/", "https://[::1]/", "https://127.1/", "https://2130706433/", "https://0.0.0.0/"} {
			attacks = append(attacks, attack{"webhook " + u, "POST", "/api/partner/webhooks", extra.PartnerKey, []byte(`{"url":"` + u + `"}`)})
		}
	}
	for _, a := range attacks {
		status, body, err := call(p.base, a.key, a.method, a.path, a.body)
		if err != nil {
			t.Fatalf("%s: %v\n%s", a.name, err, p.out)
		}
		if status < 400 || status >= 500 {
			t.Errorf("%s: answered %d %s, want a 4xx", a.name, status, body)
		}
		if r, err := http.Get(p.base + "/healthz"); err != nil {
			t.Fatalf("the engine died after %s: %v\n%s", a.name, err, p.out)
		} else {
			r.Body.Close()
		}
	}

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = p.cmd.Process.Wait()
	p = start(t, bin, dir, addr)
	status, body, err = call(p.base, c.TradingKey, "POST", "/api/trading/order",
		map[string]any{"clientOrderId": "after-" + time.Now().Format("150405.000"), "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"})
	if err != nil || status != 200 {
		t.Fatalf("after the restart an order answered %d %s %v\n%s", status, body, err, p.out)
	}
}
