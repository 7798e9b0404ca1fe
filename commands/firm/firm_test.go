package firm_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
)

// Every door that issues accounts states one rule: USD everywhere, USDC in the
// sandbox only, anything else refused with the currency and the environment.
func TestIssueCurrency(t *testing.T) {
	for _, tc := range []struct {
		currency, env string
		want          string
		params        string
	}{
		{"", firmcmd.Sandbox, "USD", ""},
		{"USD", firmcmd.Production, "USD", ""},
		{"USDC", firmcmd.Sandbox, "USDC", ""},
		{"USDC", firmcmd.Production, "", "map[currency:USDC environment:production]"},
		{"EUR", firmcmd.Sandbox, "", "map[currency:EUR environment:sandbox]"},
		{"EUR", firmcmd.Production, "", "map[currency:EUR environment:production]"},
		{"usd", firmcmd.Sandbox, "", "map[currency:usd environment:sandbox]"},
	} {
		t.Run(tc.currency+" in "+tc.env, func(t *testing.T) {
			got, err := firmcmd.IssueCurrency(tc.currency, tc.env)
			var r *commands.Refusal
			switch {
			case tc.params == "" && (err != nil || got != tc.want):
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			case tc.params != "" && (!errors.As(err, &r) || commands.StatusOf(r.Code, r.Malformed) != 400 || r.Code != "currency_not_issuable" || fmt.Sprint(r.Params) != tc.params):
				t.Fatalf("got %q, %v; want currency_not_issuable %s", got, err, tc.params)
			}
		})
	}
}
