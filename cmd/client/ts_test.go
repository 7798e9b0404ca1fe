package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

// The TypeScript client in ts/: its committed types are what the document
// generates now (npm run generate), the example typechecks against them, and
// it runs against a real engine. Without npm it skips, except under CI=true.
func TestTheTypeScriptClient(t *testing.T) {
	npmCI(t)

	t.Run("types are generated from the document", func(t *testing.T) {
		var pkg struct {
			Scripts map[string]string `json:"scripts"`
		}
		b, err := os.ReadFile(filepath.Join(ts, "package.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &pkg); err != nil {
			t.Fatal(err)
		}
		const committed = "src/schema.d.ts"
		script := pkg.Scripts["generate"]
		if !strings.HasSuffix(script, " -o "+committed) {
			t.Fatalf("package.json's generate script %q does not end in -o %s", script, committed)
		}
		out := filepath.Join(t.TempDir(), "schema.d.ts")
		inTS(t, 30*time.Second, nil, "sh", "-c", strings.TrimSuffix(script, committed)+shellQuote(out))
		want, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(ts, committed))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("cmd/client/ts/src/schema.d.ts is stale: schema/openapi.yaml generates other types; run npm run generate in cmd/client/ts")
		}
	})

	t.Run("the example typechecks", func(t *testing.T) {
		inTS(t, time.Minute, nil, "tsc", "--noEmit", "-p", ".")
	})

	t.Run("the example against an engine", func(t *testing.T) {
		e := apptest.Start(t, apptest.Options{})
		out := inTS(t, time.Minute, []string{"ENGINE_URL=" + e.URL, "ENGINE_KEY=" + e.Key}, "node", "--import", "tsx", "src/example.ts")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		m0 := regexp.MustCompile(`^placed (example-[0-9a-f]{16}) as (\S+): filled buy 0\.01 BTC-PERP at [0-9.]+$`).FindStringSubmatch(lines[0])
		if len(lines) != 3 || m0 == nil {
			t.Fatalf("output:\n%s", out)
		}
		coid, id := m0[1], m0[2]
		if !strings.HasPrefix(lines[1], "sent "+coid+" again: the order that stands is "+id+", filled buy 0.01 BTC-PERP at ") {
			t.Fatalf("the retry's line %q", lines[1])
		}
		if !regexp.MustCompile(`^the account stream, folded by revision: revision \d+ \(\d+ on connect, flat\) holds BTC-PERP long 0\.01, the fill of ` + coid + `$`).MatchString(lines[2]) {
			t.Fatalf("the stream's line %q", lines[2])
		}
		// The engine holds the settled order once.
		var got struct {
			Orders []struct {
				BrokerOrderID string `json:"brokerOrderId"`
				ClientOrderID string `json:"clientOrderId"`
				State         string `json:"state"`
			} `json:"orders"`
		}
		e.Get("/api/account/orders?state=all&limit=500").JSON(t, &got)
		if len(got.Orders) != 1 || got.Orders[0].ClientOrderID != coid || got.Orders[0].BrokerOrderID != id || got.Orders[0].State != "filled" {
			t.Fatalf("the account's orders %+v, want %s (%s) filled, once", got.Orders, id, coid)
		}
	})
}

// ts is the TypeScript client's folder.
const ts = "ts"

// npmCI installs ts/'s locked dependencies (npm ci) when node_modules is
// missing or older than package-lock.json.
func npmCI(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the TypeScript client's test needs %s (Node.js 20 or later; scripts/test installs it where apt-get runs as root): %v", tool, err)
		}
	}
	lock, err := os.Stat(filepath.Join(ts, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	installed, err := os.Stat(filepath.Join(ts, "node_modules", ".package-lock.json"))
	if err == nil && !installed.ModTime().Before(lock.ModTime()) {
		return
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	inTS(t, 3*time.Minute, nil, "npm", "ci", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund")
}

// inTS runs a command in ts/ with its node_modules/.bin first on PATH, as npm
// run does, and env added to the environment; it returns the standard output
// and fails the test when the command fails or outlives d.
func inTS(t *testing.T, d time.Duration, env []string, name string, args ...string) string {
	t.Helper()
	dir, err := filepath.Abs(ts)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "node_modules", ".bin")
	path := name
	if _, err := os.Stat(filepath.Join(bin, name)); err == nil {
		path = filepath.Join(bin, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v after %v\n%s%s", name, strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond), stdout.String(), stderr.String())
	}
	t.Logf("%s %s: %v", name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return stdout.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
