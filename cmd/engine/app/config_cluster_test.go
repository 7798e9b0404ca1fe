package app

import (
	"io"
	"strings"
	"testing"
	"time"
)

// The cluster's settings and the webhook schedule are read and checked at
// start: a bad value stops the engine with a message naming the variable.
func TestClusterAndWebhookSettings(t *testing.T) {
	parse := func(vars map[string]string) (Config, error) {
		return ParseConfig(nil, func(k string) string { return vars[k] }, io.Discard)
	}
	c, err := parse(map[string]string{"ENGINE_NODE": "n-1", "NATS_URL": "nats://127.0.0.1:14222", "ENGINE_LEASE_TTL": "3s",
		"ENGINE_WEBHOOK_BACKOFF": "1s, 2s,3s,4s,5s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Node != "n-1" || c.LeaseTTL != 3*time.Second || len(c.Firm.WebhookBackoff) != 5 || c.Firm.WebhookBackoff[1] != 2*time.Second {
		t.Fatalf("read %+v", c)
	}
	for _, bad := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"ENGINE_NODE": "n1"}, "needs NATS_URL"},
		{map[string]string{"ENGINE_NODE": "N1", "NATS_URL": "nats://x"}, "ENGINE_NODE"},
		{map[string]string{"ENGINE_NODE": "n1", "NATS_URL": "nats://x", "ENGINE_LEASE_TTL": "100ms"}, "ENGINE_LEASE_TTL"},
		{map[string]string{"ENGINE_WEBHOOK_BACKOFF": "1s,2s"}, "want 5"},
		{map[string]string{"ENGINE_WEBHOOK_BACKOFF": "1s,2s,x,4s,5s"}, "not a positive duration"},
	} {
		if _, err := parse(bad.vars); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("%v: %v, want an error saying %q", bad.vars, err, bad.want)
		}
	}
}
