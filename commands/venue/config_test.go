package venue_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/svc/engine/commands"
	venuecmd "github.com/svc/engine/commands/venue"
)

// One case per venue configuration error the spec names, and its passing neighbour.
func TestConfigRefusals(t *testing.T) {
	fee := `{"name":"fee","basis":"per_unit","amount":"0.5","timing":"per_side","direction":"both","unit":"quantity"}`
	cases := []struct {
		name, kind, body string
		status           int
		code, field      string
	}{
		{"an instrument", venuecmd.KindInstruments, `{"active":true,"maxQuantity":"5"}`, 0, "", ""},
		{"an entitlement served from the trader's feed", venuecmd.KindInstruments, `{"active":true,"entitlement":{"pricing":{"sourceId":"trader_feed"}}}`, 0, "", ""},
		{"an entitlement no trader's feed serves", venuecmd.KindInstruments, `{"active":true,"entitlement":{"pricing":{"sourceId":"cme"}}}`, 400, "entitled_source_unserved", "entitlement.pricing.sourceId"},
		{"a zero limit", venuecmd.KindInstruments, `{"active":true,"maxQuantity":"0"}`, 400, "invalid_request", "maxQuantity"},
		{"an unknown field", venuecmd.KindInstruments, `{"active":true,"colour":"red"}`, 400, "invalid_request", ""},
		{"a condition", venuecmd.KindConditions, `{"name":"std","commissions":[` + fee + `]}`, 0, "", ""},
		{"a commission without timing", venuecmd.KindConditions, `{"name":"std","commissions":[{"name":"f","basis":"per_unit","amount":"1","direction":"both","unit":"quantity"}]}`, 400, "unsupported_value", "commissions[0].timing"},
		{"a commission without direction", venuecmd.KindConditions, `{"name":"std","commissions":[{"name":"f","basis":"per_unit","amount":"1","timing":"per_side","unit":"quantity"}]}`, 400, "unsupported_value", "commissions[0].direction"},
		{"a per-unit commission without unit", venuecmd.KindConditions, `{"name":"std","commissions":[{"name":"f","basis":"per_unit","amount":"1","timing":"per_side","direction":"both"}]}`, 400, "unsupported_value", "commissions[0].unit"},
		{"a per-unit commission in notional", venuecmd.KindConditions, `{"name":"std","commissions":[{"name":"f","basis":"per_unit","amount":"1","timing":"per_side","direction":"both","unit":"notional"}]}`, 400, "unsupported_value", "commissions[0].unit"},
		{"a round turn on one side", venuecmd.KindConditions, `{"name":"std","commissions":[{"name":"f","basis":"per_order","amount":"1","timing":"round_turn","direction":"close"}]}`, 400, "round_turn_is_both", "commissions[0].direction"},
		{"a round turn on both", venuecmd.KindConditions, `{"name":"std","commissions":[{"name":"f","basis":"per_order","amount":"1","timing":"round_turn","direction":"both"}]}`, 0, "", ""},
		{"a condition's margin", venuecmd.KindConditions, `{"name":"std","commissions":[],"margin":{"initial":"0.1"}}`, 400, "margin_policy_superseded", "margin"},
		{"a condition's null margin", venuecmd.KindConditions, `{"name":"std","commissions":[],"margin":null}`, 0, "", ""},
		{"a condition's financing", venuecmd.KindConditions, `{"name":"std","commissions":[],"financing":{"rate":"0.05"}}`, 400, "financing_superseded", "financing"},
		{"a group", venuecmd.KindGroups, `{"name":"g","instruments":["BTC-PERP"]}`, 0, "", ""},
		{"a group's loss limit", venuecmd.KindGroups, `{"name":"g","instruments":[],"dailyLossLimit":"500"}`, 400, "loss_limit_unenforced", "dailyLossLimit"},
		{"a group's null loss limit", venuecmd.KindGroups, `{"name":"g","instruments":[],"dailyLossLimit":null}`, 0, "", ""},
		{"a group's weekly loss limit", venuecmd.KindGroups, `{"name":"g","instruments":[],"weeklyLossLimit":"2000"}`, 400, "loss_limit_unenforced", "weeklyLossLimit"},
		{"a group's null weekly loss limit", venuecmd.KindGroups, `{"name":"g","instruments":[],"weeklyLossLimit":null,"dailyLossLimit":null}`, 0, "", ""},
		{"a group's margin", venuecmd.KindGroups, `{"name":"g","instruments":[],"margin":{"initial":"0.1"}}`, 400, "margin_policy_superseded", "margin"},
		{"a group's financing", venuecmd.KindGroups, `{"name":"g","instruments":[],"financing":{}}`, 400, "financing_superseded", "financing"},
		{"a group naming an instrument twice", venuecmd.KindGroups, `{"name":"g","instruments":["A","A"]}`, 400, "invalid_request", "instruments[1]"},
		{"a paper route", venuecmd.KindRoutes, `{"target":"paper"}`, 0, "", ""},
		{"a route elsewhere", venuecmd.KindRoutes, `{"target":"cme"}`, 400, "unsupported_value", "target"},
		{"a stage", venuecmd.KindStages, `{"name":"Evaluation","version":"v1"}`, 0, "", ""},
		{"a stage without version", venuecmd.KindStages, `{"name":"Evaluation"}`, 400, "invalid_request", "version"},
		{"a rule", venuecmd.KindRules, `{"entryHalted":true,"maxQuantity":"2"}`, 0, "", ""},
		{"a rule's zero limit", venuecmd.KindRules, `{"entryHalted":false,"maxQuantity":"0"}`, 400, "invalid_request", "maxQuantity"},
		// Every value from outside is bounded.
		{"a provider route's overlong id", venuecmd.KindRoutes, `{"target":"provider:` + strings.Repeat("p", 65) + `"}`, 400, "invalid_request", "target"},
		{"a rule's overlong group", venuecmd.KindRules, `{"groupId":"` + strings.Repeat("g", 65) + `","entryHalted":true}`, 400, "invalid_request", "groupId"},
		{"a group's overlong condition", venuecmd.KindGroups, `{"name":"g","instruments":[],"conditionId":"` + strings.Repeat("c", 65) + `"}`, 400, "invalid_request", "conditionId"},
		{"a commission above the maximum", venuecmd.KindConditions, `{"name":"std","commissions":[{"name":"f","basis":"per_order","amount":"1000000001","timing":"per_side","direction":"both"}]}`, 400, "invalid_request", "commissions[0].amount"},
		{"a limit above the maximum", venuecmd.KindInstruments, `{"active":true,"maxQuantity":"1e12"}`, 422, "invalid_request", "maxQuantity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &venuecmd.SetConfig{Kind: tc.kind, ID: "x1", Body: []byte(tc.body)}
			err := c.Validate()
			if tc.status == 0 {
				if err != nil || len(c.Canonical) == 0 {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var r *commands.Refusal
			if !errors.As(err, &r) || commands.StatusOf(r.Code, r.Malformed) != tc.status || string(r.Code) != tc.code {
				t.Fatalf("want %d %s, got %v", tc.status, tc.code, err)
			}
			if tc.field != "" && r.Params["field"] != tc.field {
				t.Fatalf("field %v, want %s", r.Params["field"], tc.field)
			}
		})
	}
	// Retiring needs the version read; an unknown kind is not found.
	if err := (&venuecmd.SetConfig{Kind: venuecmd.KindGroups, ID: "g", Retire: true}).Validate(); err == nil {
		t.Fatal("a retire without a version")
	}
	var r *commands.Refusal
	if err := (&venuecmd.SetConfig{Kind: "margins", ID: "g", Body: []byte(`{}`)}).Validate(); !errors.As(err, &r) || commands.StatusOf(r.Code, r.Malformed) != 404 {
		t.Fatalf("unknown kind: %v", err)
	}
}

// A policy's figures are bounded like every money amount.
func TestPolicyFiguresAreBounded(t *testing.T) {
	c := &venuecmd.StatePolicy{PolicyID: "house", Version: "1",
		Body: []byte(`{"authority":"v1","posting":{"currency":"USD","decimals":2},"dailyLossLimit":{"value":"1000000001","sourced":true}}`)}
	var r *commands.Refusal
	if err := c.Validate(); !errors.As(err, &r) || commands.StatusOf(r.Code, r.Malformed) != 400 || r.Params["field"] != "dailyLossLimit.value" {
		t.Fatalf("an unbounded figure: %v", err)
	}
}
