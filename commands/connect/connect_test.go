package connect_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/svc/engine/commands"
	connectcmd "github.com/svc/engine/commands/connect"
	"github.com/svc/engine/events"
	evconnect "github.com/svc/engine/events/connect"
)

// refusedAs fails t unless err is a refusal of status and code naming field
// (field "" for a refusal that names none).
func refusedAs(t *testing.T, err error, status int, code, field string) {
	t.Helper()
	var ref *commands.Refusal
	if !errors.As(err, &ref) {
		t.Fatalf("want a refusal, got %v", err)
	}
	if commands.StatusOf(ref.Code, ref.Malformed) != status || string(ref.Code) != code || (field != "" && ref.Params["field"] != field) {
		t.Fatalf("got %d %s %v, want %d %s field %s", commands.StatusOf(ref.Code, ref.Malformed), ref.Code, ref.Params, status, code, field)
	}
}

func TestOrigin(t *testing.T) {
	ok := map[string]string{
		"https://app.example.com":       "https://app.example.com",
		"https://App.Example.COM":       "https://app.example.com",
		"HTTPS://APP.EXAMPLE.COM/":      "https://app.example.com",
		"https://app.example.com/":      "https://app.example.com",
		"https://app.example.com:8443":  "https://app.example.com:8443",
		"https://[2001:db8::1]:443":     "https://[2001:db8::1]:443",
		"http://localhost:3000":         "http://localhost:3000",
		"http://LOCALHOST:3000":         "http://localhost:3000",
		"http://localhost":              "http://localhost",
		"http://127.0.0.1:8080/":        "http://127.0.0.1:8080",
		"http://[::1]:3000":             "http://[::1]:3000",
		"https://xn--caf-dma.example":   "https://xn--caf-dma.example",
		"https://a.b.c.d.example.co.uk": "https://a.b.c.d.example.co.uk",
	}
	for in, want := range ok {
		got, err := connectcmd.Origin("websites", in)
		if err != nil || got != want {
			t.Errorf("Origin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]string{
		"empty":                     "",
		"no scheme":                 "app.example.com",
		"scheme-relative":           "//app.example.com",
		"path":                      "https://app.example.com/connect",
		"path after slash":          "https://app.example.com//",
		"query":                     "https://app.example.com?x=1",
		"query after slash":         "https://app.example.com/?x=1",
		"fragment":                  "https://app.example.com#top",
		"userinfo":                  "https://user@app.example.com",
		"userinfo with password":    "https://user:pw@app.example.com",
		"wildcard subdomain":        "https://*.example.com",
		"wildcard alone":            "*",
		"space in host":             "https://app .example.com",
		"http on a public host":     "http://app.example.com",
		"http on a loopback suffix": "http://localhost.example.com",
		"http on a private address": "http://192.168.1.10",
		"other scheme":              "ftp://app.example.com",
		"javascript":                "javascript:alert(1)",
		"data":                      "data:text/html,hi",
		"opaque":                    "https:app.example.com",
		"bad port":                  "https://app.example.com:port",
		"empty port":                "https://app.example.com:",
		"port out of range":         "https://app.example.com:99999",
		"port zero":                 "https://app.example.com:0",
		"too long":                  "https://" + strings.Repeat("a", connectcmd.MaxURL) + ".com",
		"null origin":               "null",
	}
	for name, v := range bad {
		t.Run(name, func(t *testing.T) {
			got, err := connectcmd.Origin("websites", v)
			if got != "" {
				t.Fatalf("answered %q", got)
			}
			refusedAs(t, err, 400, "invalid_request", "websites")
		})
	}
}

func valid() evconnect.Settings {
	return evconnect.Settings{Name: "Acme", Websites: []string{"https://app.example.com"}}
}

func TestCheckSettings(t *testing.T) {
	t.Run("defaults are filled and websites made origins", func(t *testing.T) {
		s := valid()
		s.Websites = []string{"https://App.Example.com/", "http://localhost:3000"}
		if err := connectcmd.CheckSettings(&s); err != nil {
			t.Fatal(err)
		}
		wl := s.WhiteLabel
		if wl.Currency != "USD" || wl.Label != "Paper" || wl.StartingBalance.Cmp(events.Int(50000)) != 0 {
			t.Fatalf("white label %+v", wl)
		}
		if strings.Join(s.Websites, " ") != "https://app.example.com http://localhost:3000" {
			t.Fatalf("websites %v", s.Websites)
		}
	})
	t.Run("the default white label passes as it is", func(t *testing.T) {
		s := valid()
		s.WhiteLabel = connectcmd.DefaultWhiteLabel()
		if err := connectcmd.CheckSettings(&s); err != nil || s.WhiteLabel.Label != "Paper" || !s.WhiteLabel.Enabled {
			t.Fatalf("%+v %v", s.WhiteLabel, err)
		}
	})
	ok := map[string]func(*evconnect.Settings){
		"ten websites":             func(s *evconnect.Settings) { s.Websites = sites(connectcmd.MaxWebsites) },
		"an https logo":            func(s *evconnect.Settings) { s.LogoURL = "https://cdn.example.com/logo.png" },
		"a loopback http logo":     func(s *evconnect.Settings) { s.LogoURL = "http://localhost:3000/logo.png" },
		"a balance of MaxAmount":   func(s *evconnect.Settings) { s.WhiteLabel.StartingBalance = commands.MaxAmount },
		"a balance in cents":       func(s *evconnect.Settings) { s.WhiteLabel.StartingBalance = events.MustDecimal("1000.25") },
		"a label of its own":       func(s *evconnect.Settings) { s.WhiteLabel.Label = "Acme Paper" },
		"a name of 64 characters":  func(s *evconnect.Settings) { s.Name = strings.Repeat("n", connectcmd.MaxName) },
		"white label switched off": func(s *evconnect.Settings) { s.WhiteLabel.Enabled = false },
	}
	for name, edit := range ok {
		t.Run(name, func(t *testing.T) {
			s := valid()
			edit(&s)
			if err := connectcmd.CheckSettings(&s); err != nil {
				t.Fatal(err)
			}
		})
	}
	bad := []struct {
		name          string
		edit          func(*evconnect.Settings)
		status        int
		code, field   string
		balanceParams bool
	}{
		{name: "no name", edit: func(s *evconnect.Settings) { s.Name = "" }, status: 400, code: "invalid_request", field: "name"},
		{name: "a name of 65 characters", edit: func(s *evconnect.Settings) { s.Name = strings.Repeat("n", connectcmd.MaxName+1) }, status: 400, code: "invalid_request", field: "name"},
		{name: "a name with a control character", edit: func(s *evconnect.Settings) { s.Name = "Ac\x1bme" }, status: 400, code: "invalid_request", field: "name"},
		{name: "no websites", edit: func(s *evconnect.Settings) { s.Websites = nil }, status: 400, code: "invalid_request", field: "websites"},
		{name: "eleven websites", edit: func(s *evconnect.Settings) { s.Websites = sites(connectcmd.MaxWebsites + 1) }, status: 400, code: "invalid_request", field: "websites"},
		{name: "a website twice", edit: func(s *evconnect.Settings) { s.Websites = []string{"https://a.example.com", "https://A.example.com/"} },
			status: 400, code: "invalid_request", field: "websites"},
		{name: "a website with a path", edit: func(s *evconnect.Settings) { s.Websites = []string{"https://a.example.com/x"} }, status: 400, code: "invalid_request", field: "websites"},
		{name: "a wildcard website", edit: func(s *evconnect.Settings) { s.Websites = []string{"https://*.example.com"} }, status: 400, code: "invalid_request", field: "websites"},
		{name: "an http website on a public host", edit: func(s *evconnect.Settings) { s.Websites = []string{"http://a.example.com"} }, status: 400, code: "invalid_request", field: "websites"},
		{name: "an http logo on a public host", edit: func(s *evconnect.Settings) { s.LogoURL = "http://cdn.example.com/logo.png" }, status: 400, code: "invalid_request", field: "logoUrl"},
		{name: "a logo without a host", edit: func(s *evconnect.Settings) { s.LogoURL = "logo.png" }, status: 400, code: "invalid_request", field: "logoUrl"},
		{name: "a logo with userinfo", edit: func(s *evconnect.Settings) { s.LogoURL = "https://u:p@cdn.example.com/logo.png" }, status: 400, code: "invalid_request", field: "logoUrl"},
		{name: "a javascript logo", edit: func(s *evconnect.Settings) { s.LogoURL = "javascript:alert(1)" }, status: 400, code: "invalid_request", field: "logoUrl"},
		{name: "a logo URL too long", edit: func(s *evconnect.Settings) { s.LogoURL = longLogo }, status: 400, code: "invalid_request", field: "logoUrl"},
		{name: "a negative balance", edit: func(s *evconnect.Settings) { s.WhiteLabel.StartingBalance = events.MustDecimal("-1") },
			status: 422, code: "invalid_request", field: "whiteLabel.startingBalance"},
		{name: "a balance above MaxAmount", edit: func(s *evconnect.Settings) { s.WhiteLabel.StartingBalance = events.MustDecimal("1000000000.01") },
			status: 422, code: "invalid_request", field: "whiteLabel.startingBalance", balanceParams: true},
		{name: "a balance in fractions of a cent", edit: func(s *evconnect.Settings) { s.WhiteLabel.StartingBalance = events.MustDecimal("100.001") },
			status: 400, code: "amount_precision_exceeded"},
		{name: "a currency other than USD", edit: func(s *evconnect.Settings) { s.WhiteLabel.Currency = "EUR" }, status: 400, code: "invalid_request", field: "whiteLabel.currency"},
		{name: "a lower-case usd", edit: func(s *evconnect.Settings) { s.WhiteLabel.Currency = "usd" }, status: 400, code: "invalid_request", field: "whiteLabel.currency"},
		{name: "a label with a control character", edit: func(s *evconnect.Settings) { s.WhiteLabel.Label = "Pa\u0000per" }, status: 400, code: "invalid_request", field: "whiteLabel.label"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			s := valid()
			tc.edit(&s)
			err := connectcmd.CheckSettings(&s)
			refusedAs(t, err, tc.status, tc.code, tc.field)
			var ref *commands.Refusal
			if errors.As(err, &ref); tc.balanceParams && ref.Params["max"] != commands.MaxAmount.String() {
				t.Fatalf("params %v", ref.Params)
			}
		})
	}
}

// longLogo is an https logo URL longer than MaxURL.
var longLogo = "https://cdn.example.com/" + strings.Repeat("a", connectcmd.MaxURL)

// sites is n distinct https origins.
func sites(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("https://s%d.example.com", i)
	}
	return out
}

func TestTrader(t *testing.T) {
	for _, v := range []string{"t", "trader-42", "user@example.com", "caf\u00e9 \u6771\u4eac", strings.Repeat("x", connectcmd.MaxTrader),
		strings.Repeat("\u00e9", connectcmd.MaxTrader)} {
		if err := connectcmd.Trader("trader", v); err != nil {
			t.Errorf("%q refused: %v", v, err)
		}
	}
	bad := map[string]string{
		"empty":          "",
		"129 characters": strings.Repeat("x", connectcmd.MaxTrader+1),
		"NUL":            "a\u0000b",
		"ESC":            "a\x1b[31m",
		"newline":        "a\nb",
		"tab":            "a\tb",
		"DEL":            "a\u007f",
		"C1 control":     "a\u0085",
		"bidi override":  "a\u202eb",
		"invalid UTF-8":  "a\xffb",
		"leading space":  " a",
		"trailing space": "a ",
	}
	for name, v := range bad {
		t.Run(name, func(t *testing.T) {
			refusedAs(t, connectcmd.Trader("trader", v), 400, "invalid_request", "trader")
		})
	}
	t.Run("CreateLink validates its trader", func(t *testing.T) {
		refusedAs(t, (&connectcmd.CreateLink{Trader: ""}).Validate(), 400, "invalid_request", "trader")
		if err := (&connectcmd.CreateLink{Trader: "t"}).Validate(); err != nil {
			t.Fatal(err)
		}
	})
}
