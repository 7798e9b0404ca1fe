package tradovate_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/svc/engine/sim/tradovate"
)

func TestContractMonthsAndTheirEntities(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	if got := e.sim.Contracts("ES"); len(got) != 3 || got[0] != "ESZ6" || got[1] != "ESH7" || got[2] != "ESM7" {
		t.Fatalf("ES months = %v", got)
	}
	tok := e.token(demoLogin) // reading the contract library needs no market data
	c := e.ok(tok, "contract/find?name=ESZ6", nil)
	m := e.ok(tok, "contractMaturity/item?id="+idText(c["contractMaturityId"]), nil)
	if m["expirationMonth"] != float64(12) || m["isFront"] != true || m["expirationDate"] != "2026-12-18T13:30:00.000Z" {
		t.Fatalf("maturity = %v", m)
	}
	p := e.ok(tok, "product/item?id="+idText(m["productId"]), nil)
	if p["name"] != "ES" || p["tickSize"] != 0.25 || p["valuePerPoint"] != float64(50) || p["priceFormatType"] != "Decimal" || p["priceFormat"] != float64(-2) {
		t.Fatalf("product = %v", p)
	}
	if deps := e.list(tok, "contract/deps?masterid="+idText(c["contractMaturityId"])); len(deps) != 1 || deps[0]["name"] != "ESZ6" {
		t.Fatalf("contract/deps = %v", deps)
	}
	if deps := e.list(tok, "contractMaturity/deps?masterid="+idText(p["id"])); len(deps) != 3 {
		t.Fatalf("contractMaturity/deps = %v", deps)
	}
	if items := e.list(tok, "contract/items?ids="+idText(c["id"])+",999"); len(items) != 1 {
		t.Fatalf("contract/items = %v", items)
	}
	if sug := e.list(tok, "contract/suggest?t=NQ&l=2"); len(sug) != 2 || sug[0]["name"] != "NQZ6" {
		t.Fatalf("contract/suggest = %v", sug)
	}
	if st, _ := e.call(tok, "contract/find?name=ESX9", nil); st != http.StatusNotFound {
		t.Fatalf("unknown contract: %d", st)
	}
	zn := e.ok(tok, "contract/find?name=ZNZ6", nil)
	znm := e.ok(tok, "contractMaturity/item?id="+idText(zn["contractMaturityId"]), nil)
	if znm["firstIntentDate"] != "2026-11-30T00:00:00.000Z" {
		t.Fatalf("ZN maturity = %v", znm)
	}
}

func TestRollDateAndRollContract(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	roll := func(body map[string]any) string {
		t.Helper()
		ans := e.ok(tok, "contract/rollcontract", body)
		c, _ := ans["contract"].(map[string]any)
		if c == nil {
			t.Fatalf("rollcontract %v = %v", body, ans)
		}
		return c["name"].(string)
	}
	if got := roll(map[string]any{"name": "ES", "forward": true}); got != "ESZ6" {
		t.Fatalf("ES now = %s", got)
	}
	if got := roll(map[string]any{"name": "ESZ6", "forward": true}); got != "ESH7" {
		t.Fatalf("ESZ6 forward = %s", got)
	}
	if got := roll(map[string]any{"name": "ESZ6", "forward": true, "ifExpired": true}); got != "ESZ6" {
		t.Fatalf("ESZ6 if expired = %s", got)
	}
	// Past the roll date (eight days before expiration) ES trades the next month; isFront stays
	// with the month until it expires, as the provider documents.
	e.clock.Advance(37 * 24 * time.Hour) // 2026-12-11
	tok = e.token(liveLogin)
	if got := roll(map[string]any{"name": "ES", "forward": true}); got != "ESH7" {
		t.Fatalf("ES after the roll date = %s", got)
	}
	c := e.ok(tok, "contract/find?name=ESZ6", nil)
	if m := e.ok(tok, "contractMaturity/item?id="+idText(c["contractMaturityId"]), nil); m["isFront"] != true {
		t.Fatalf("ESZ6 not front before expiry: %v", m)
	}
	// A roll date set by hand: NQ rolls now.
	must(t, e.sim.SetRollDate("NQZ6", time.Time{}))
	if got := e.sim.FrontContract("NQ"); got != "NQH7" {
		t.Fatalf("NQ after SetRollDate = %s", got)
	}
	// An expired month refuses orders and leaves the suggestions.
	must(t, e.sim.SetExpiration("ESZ6", time.Time{}))
	if ans := e.place(tok, order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Market", nil)); ans["failureReason"] != "InvalidContract" {
		t.Fatalf("order on an expired month = %v", ans)
	}
	for _, c := range e.list(tok, "contract/suggest?t=ESZ&l=5") {
		if c["name"] == "ESZ6" {
			t.Fatal("suggested an expired month")
		}
	}
	if m := e.ok(tok, "contractMaturity/item?id="+idText(c["contractMaturityId"]), nil); m["isFront"] != false {
		t.Fatalf("expired month still front: %v", m)
	}
}

func TestSetPriceOfAProductNamesItsMonthToTrade(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	must(t, e.sim.SetPrice("ES", "5100"))
	if got := e.sim.Price("ESZ6"); got != "5100" {
		t.Fatalf("ESZ6 = %s", got)
	}
	if got := e.sim.Price("ESH7"); got != "5000" {
		t.Fatalf("ESH7 = %s", got)
	}
	if err := e.sim.SetPrice("ESZ6", "-1"); err == nil {
		t.Fatal("a negative price was driven")
	}
}
