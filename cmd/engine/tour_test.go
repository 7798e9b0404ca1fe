package main_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// tourScript is the README tour's bash block, with an `echo @@step N` before
// each numbered step's comment so the output can be told apart by step; the
// commands are the README's, unchanged.
func tourScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, tour, ok := strings.Cut(string(b), "## A five-minute tour")
	if !ok {
		t.Fatal("README.md has no tour section")
	}
	_, block, ok := strings.Cut(tour, "```bash\n")
	if !ok {
		t.Fatal("the tour has no bash block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("the tour's bash block is not closed")
	}
	step := regexp.MustCompile(`^# (\d+)\. `)
	var out []string
	for _, line := range strings.Split(block, "\n") {
		if m := step.FindStringSubmatch(line); m != nil {
			out = append(out, "echo @@step "+m[1])
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// Every step of the README's tour runs as written against the binary, and
// prints what the README says you see. The webhook step's endpoint is a
// local https receiver the engine trusts (SSL_CERT_FILE,
// ENGINE_WEBHOOK_ALLOW_PRIVATE), so the registration and the ping succeed.
func TestTheReadmeTourRunsAsWritten(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the tour needs %s (README prerequisites: install it)", tool)
		}
	}
	var pings atomic.Int64
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { pings.Add(1) }))
	t.Cleanup(hook.Close)
	work := t.TempDir()
	ca := filepath.Join(work, "hook.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, build(t), filepath.Join(work, "data"), freePort(t), "SSL_CERT_FILE="+ca, "ENGINE_WEBHOOK_ALLOW_PRIVATE=true")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", tourScript(t))
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "B="+p.base, "HOOK="+hook.URL+"/engine-hooks")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tour: %v\n%s", err, out)
	}
	steps := map[string]string{}
	for _, part := range strings.Split(string(out), "@@step ")[1:] {
		n, text, _ := strings.Cut(part, "\n")
		steps[n] = text
	}
	for n, want := range map[string][]string{
		"1": {`"accountNumber":`},
		"2": {`"state":"filled"`, `{"code":"idempotency_conflict","params":`},
		"3": {`"kind":"stop"`, `"kind":"target"`, `"kind":"runner"`, `{"bracket":{"id":`, `"state":"ended"},"refused":null,"stuck":0}`},
		"4": {`"revision":`},
		"5": {`{"tradingLocked":true,"lockReason":"daily_loss_limit"}`, `{"code":"risk_locked"}`, `{"tradingLocked":false}`},
		"6": {`{"webhook":{`, `"secret":"whsec_`, `{"delivery":{"status":"succeeded","responseCode":200`, `"deliveries":[{`, `"eventType":"ping"`},
		"7": {`"state":"candidate"`, `"manifestHash":`, "Idempotent-Replayed: true", `"error":"idempotency_conflict"`},
		"8": {`"state":"created"`, `"hostedUrl":"http`},
	} {
		text := steps[n]
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("step %s does not show %s:\n%s", n, w, text)
			}
		}
		for _, bad := range []string{`"code":"not_found"`, `"error":"not_found"`, "jq: error", "curl: ("} {
			if strings.Contains(text, bad) {
				t.Errorf("step %s shows %s:\n%s", n, bad, text)
			}
		}
	}
	if len(steps) != 8 {
		t.Errorf("the tour ran %d steps, want 8:\n%s", len(steps), out)
	}
	if pings.Load() == 0 {
		t.Errorf("the webhook step's test ping never reached the endpoint:\n%s", steps["6"])
	}
	if t.Failed() {
		fmt.Fprintf(os.Stderr, "the tour's whole output:\n%s\n", out)
	}
}
