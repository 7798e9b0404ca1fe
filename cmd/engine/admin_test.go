package main_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/svc/engine/engine/seal"
)

// adminLine is the JSON line engine admin printed for its action.
func adminLine(t *testing.T, out string) map[string]any {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, `{"action"`) {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("engine admin printed no action line:\n%s", out)
	return nil
}

// engine admin -h lists the actions and exits 0; each action has a help
// of its own, naming its flags only.
func TestAdminHelp(t *testing.T) {
	bin := build(t)
	for _, args := range [][]string{{"admin", "--help"}, {"admin", "-h"}, {"admin", "help"}} {
		out, code := run(t, bin, nil, args...)
		if code != 0 || !strings.Contains(out, "Usage: engine admin <action>") || !strings.Contains(out, "create-user") || !strings.Contains(out, "issue-key") {
			t.Fatalf("engine %v: exit %d\n%s", args, code, out)
		}
	}
	out, code := run(t, bin, nil, "admin", "issue-key", "--help")
	if code != 0 || !strings.Contains(out, "Usage: engine admin issue-key") || !strings.Contains(out, "-email") || !strings.Contains(out, "-name") || strings.Contains(out, "-firm") {
		t.Fatalf("engine admin issue-key --help: exit %d\n%s", code, out)
	}
	out, code = run(t, bin, nil, "admin", "grant-operator", "-h")
	if code != 0 || !strings.Contains(out, "-venue") || !strings.Contains(out, "-scopes") || strings.Contains(out, "-password-stdin") {
		t.Fatalf("engine admin grant-operator -h: exit %d\n%s", code, out)
	}
	out, code = run(t, bin, nil, "admin", "no-such-action")
	wantRefused(t, "an unknown action", out, code, "unknown action", "no-such-action")
}

// engine admin against a running production engine on the embedded log:
// the actions go to that engine over its admin socket, it serves on, and
// what they made is usable at once through the HTTP API.
func TestAdminOnARunningEngine(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	keys, err := seal.NewKeySetting("k1")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"ENGINE_ENV=production", "ENGINE_MARKET_FEED=simulated", "ENGINE_SEAL_KEYS=" + keys}
	p := start(t, bin, dir, freePort(t), env...)
	env = append(env, "ENGINE_DATA_DIR="+dir)

	out, code := run(t, bin, env, "admin", "create-user", "-email", "Owner@Firm.example", "-verified")
	if code != 0 {
		t.Fatalf("create-user on a running engine: exit %d\n%s", code, out)
	}
	u := adminLine(t, out)
	if u["email"] != "owner@firm.example" || len(u["password"].(string)) < 12 {
		t.Fatalf("create-user printed %v", u)
	}
	out, code = run(t, bin, env, "admin", "issue-key", "-email", "owner@firm.example", "-name", "first")
	if code != 0 {
		t.Fatalf("issue-key on a running engine: exit %d\n%s", code, out)
	}
	key, _ := adminLine(t, out)["tradingKey"].(string)
	if !strings.HasPrefix(key, "svc_sk_") {
		t.Fatalf("issue-key printed %s", out)
	}
	out, code = run(t, bin, env, "admin", "issue-key", "-email", "bad address")
	wantRefused(t, "an action the engine refuses", out, code, "email")

	if code, why, err := readyz(p.base); err != nil || code != http.StatusOK {
		t.Fatalf("the engine after admin: %d %q %v\n%s", code, why, err, p.out)
	}
	if code, body, err := call(p.base, key, "POST", "/api/account/demo", map[string]any{}); err != nil || code != http.StatusCreated {
		t.Fatalf("demo account with the admin's key: %d %s %v", code, body, err)
	}
	code, body, err := call(p.base, key, "GET", "/api/account/list", nil)
	var list struct {
		Accounts []any `json:"accounts"`
	}
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Accounts) != 1 {
		t.Fatalf("list with the admin's key: %d %s %v", code, body, err)
	}
	stop(t, p)
}
