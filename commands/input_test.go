package commands_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
)

// refusedAs fails t unless err is an invalid_request refusal of status naming field.
func refusedAs(t *testing.T, err error, status int, field string) {
	t.Helper()
	var ref *commands.Refusal
	if !errors.As(err, &ref) {
		t.Fatalf("want a refusal, got %v", err)
	}
	if commands.StatusOf(ref.Code, ref.Malformed) != status || ref.Code != "invalid_request" || ref.Params["field"] != field {
		t.Fatalf("got %d %s %v, want %d invalid_request field %s", commands.StatusOf(ref.Code, ref.Malformed), ref.Code, ref.Params, status, field)
	}
}

func TestClientOrderID(t *testing.T) {
	ok := []string{"my-1", "c1", "http-3-0-12", "01J00000000000000000000000", "a.b_c:d-e", strings.Repeat("x", 64)}
	for _, v := range ok {
		if err := commands.ClientOrderID("clientOrderId", v); err != nil {
			t.Errorf("%q refused: %v", v, err)
		}
	}
	bad := map[string]string{
		"empty":            "",
		"65 characters":    strings.Repeat("x", 65),
		"NUL":              "a\u0000b",
		"ESC":              "a\x1b[31mred",
		"DEL":              "a\u007f",
		"C1 control":       "a\u0085",
		"newline":          "a\nb",
		"space":            "a b",
		"leading space":    " a",
		"bidi override":    "a\u202eb",
		"bidi isolate":     "a\u2066b",
		"invalid UTF-8":    "a\xff\xfeb",
		"non-ASCII letter": "caf\u00e9",
		"slash":            "a/b",
	}
	for name, v := range bad {
		t.Run(name, func(t *testing.T) {
			refusedAs(t, commands.ClientOrderID("clientOrderId", v), 400, "clientOrderId")
		})
	}
}

func TestIdentifierAndText(t *testing.T) {
	ok := []string{"ref-1", "Order 7 (retry)", "caf\u00e9 \u6771\u4eac", "\U0001F600", strings.Repeat("\u00e9", 128)}
	for _, v := range ok {
		if err := commands.Identifier("referenceId", v, 128); err != nil {
			t.Errorf("%q refused: %v", v, err)
		}
	}
	bad := map[string]string{
		"empty":             "",
		"129 characters":    strings.Repeat("x", 129),
		"NUL":               "ref\u0000",
		"ESC / ANSI":        "ref\x1b[2J",
		"DEL":               "ref\u007f",
		"C1 control":        "ref\u009b31m",
		"tab":               "ref\tx",
		"bidi override LRE": "ref\u202ax",
		"bidi override RLO": "ref\u202ex",
		"bidi isolate PDI":  "ref\u2069x",
		"zero-width space":  "ref\u200bx",
		"no-break space":    "ref\u00a0x",
		"invalid UTF-8":     "ref\xc3\x28",
		"replacement char":  "ref\ufffd",
		"leading space":     " ref",
		"trailing space":    "ref ",
	}
	for name, v := range bad {
		t.Run(name, func(t *testing.T) {
			refusedAs(t, commands.Identifier("referenceId", v, 128), 400, "referenceId")
		})
	}
	if err := commands.Text("label", "", 128); err != nil {
		t.Fatalf("empty text refused: %v", err)
	}
	refusedAs(t, commands.Text("label", "x\u0000", 128), 400, "label")
}

func TestEmail(t *testing.T) {
	for _, v := range []string{"demo@example.com", "a.b+c@sub.example.co", "x@example.com"} {
		if err := commands.Email("email", v); err != nil {
			t.Errorf("%q refused: %v", v, err)
		}
	}
	for _, v := range []string{"", "not an email", "Name <a@example.com>", "a@localhost", "a@example.com.", "@example.com",
		"a@example.com\u0000", "a\u202e@example.com", strings.Repeat("a", 65) + "@example.com", "a@" + strings.Repeat("b", 250) + ".com"} {
		t.Run(v, func(t *testing.T) {
			refusedAs(t, commands.Email("email", v), 400, "email")
		})
	}
}

func TestAmount(t *testing.T) {
	if err := commands.Amount("amount", events.MustDecimal("-1000000000"), commands.MaxAmount); err != nil {
		t.Fatalf("the maximum refused: %v", err)
	}
	err := commands.Amount("amount", events.MustDecimal("1000000000.01"), commands.MaxAmount)
	refusedAs(t, err, 422, "amount")
	var ref *commands.Refusal
	if errors.As(err, &ref); ref.Params["max"] != "1000000000" {
		t.Fatalf("params %v", ref.Params)
	}
}
