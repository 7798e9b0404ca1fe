package fill

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/svc/engine/domain/order"
)

// Adding an order type, a side or a time in force to domain/order is a
// change this test walks you through: it fails naming each place that has
// not learnt the new value yet.
func TestEveryPlaceKnowsTheOrderVocabulary(t *testing.T) {
	// 1. The fill rule. Each type says here how the paper book fills it;
	// the rule itself is At and Order.Crosses (the account's book and the
	// paper reactor, engine/paper's levelsOf for its wake index, call them).
	rules := map[order.Type]string{
		order.Market:    "fills at the touch",
		order.Limit:     "fills at the touch at or better than its limit, or at its limit once touched",
		order.Stop:      "triggers at or through its stop (at the stop after a gap), then fills at the touch",
		order.StopLimit: "triggers as a stop, then rests as a limit",
	}
	for _, sp := range order.Types() {
		if _, ok := rules[sp.Type]; !ok {
			t.Errorf("order type %s has no fill rule: teach engine/fill's At and Order.Crosses how it fills (and engine/paper's levelsOf where it wakes), then describe it in this test", sp.Type)
			continue
		}
		o := Order{Side: order.Buy, Type: sp.Type}
		if sp.LimitPrice {
			o.Limit = p("200")
		}
		if sp.StopPrice {
			o.Stop = p("1")
		}
		if d := At(o, d("99"), d("101"), Seen{}); !d.Fill && !d.Trigger {
			t.Errorf("order type %s: a quote through every price it names does nothing (fill.At)", sp.Type)
		}
	}

	// 2. The OpenAPI document: every enum of orderType(s), side and
	// timeInForce/tifs lists the vocabulary, in its order.
	doc, err := os.ReadFile(filepath.Join("..", "..", "schema", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	enums := map[string][]string{
		"orderType": order.TypeNames(), "orderTypes": order.TypeNames(),
		"side": order.Names(order.Sides()), "timeInForce": order.Names(order.TIFs()), "tifs": order.Names(order.TIFs()),
	}
	var entries []string
	for _, sp := range order.Types() {
		if sp.Entry {
			entries = append(entries, string(sp.Type))
		}
	}
	re := regexp.MustCompile(`\b(orderTypes?|side|timeInForce|tifs): \{[^\n]*?\[([a-z_, ]+)\]`)
	found := map[string]int{}
	for i, line := range strings.Split(string(doc), "\n") {
		for _, m := range re.FindAllStringSubmatch(line, -1) {
			got := strings.Split(strings.ReplaceAll(m[2], " ", ""), ",")
			if m[1] == "side" && !slices.Contains(got, "buy") {
				continue // a position's side (long, short)
			}
			found[m[1]]++
			if m[1] == "orderType" && slices.Equal(got, entries) {
				continue // the entry of an exit plan (order.Spec.Entry)
			}
			if want := enums[m[1]]; !slices.Equal(got, want) {
				t.Errorf("schema/openapi.yaml:%d: %s lists %v, the vocabulary %v", i+1, m[1], got, want)
			}
		}
	}
	for _, k := range []string{"orderType", "side", "timeInForce"} {
		if found[k] == 0 {
			t.Errorf("schema/openapi.yaml: no enum of %s found: this test reads them as `%s: {type: string, enum: [...]}`", k, k)
		}
	}

	// 3. The lists of capabilities the API answers: they spell every value
	// or take them from domain/order.
	for _, place := range []struct{ file, what string }{
		{"projections/frames/frame.go", "the paper book's capabilities (orderTypes, tifs) in every account frame"},
		{"commands/venue/manifest.go", "the orderTypes and timeInForce a provider manifest may list"},
	} {
		src, err := os.ReadFile(filepath.Join("..", "..", place.file))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), `"github.com/svc/engine/domain/order"`) {
			continue
		}
		for _, name := range append(order.TypeNames(), order.Names(order.TIFs())...) {
			if !strings.Contains(string(src), `"`+name+`"`) {
				t.Errorf("%s does not know %q: add it to %s", place.file, name, place.what)
			}
		}
	}
}
