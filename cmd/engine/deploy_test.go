package main_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// Two deployments named apart share one NATS server: each gets its own
// commit stream, subjects and market data streams, both serve and trade, and
// nothing is left on the server afterwards.
func TestTwoDeploymentsShareOneNATSServer(t *testing.T) {
	url := newNATS(t).url()
	bin := build(t)
	suffix := strings.ToLower(ulid.Make().String()[16:])
	names := []string{"ta" + suffix, "tb" + suffix}
	t.Cleanup(func() { removeDeploymentStreams(t, url, names) })
	for _, name := range names {
		dir, addr := t.TempDir(), freePort(t)
		p := start(t, bin, dir, addr, "NATS_URL="+url, "ENGINE_DEPLOYMENT="+name)
		c := readCreds(t, dir)
		status, body, err := call(p.base, c.TradingKey, "POST", "/api/trading/order",
			map[string]any{"clientOrderId": "d-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"})
		if err != nil || status != 200 {
			t.Fatalf("deployment %s: order answered %d %s %v\n%s", name, status, body, err, p.out)
		}
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for _, name := range names {
		if _, err := js.Stream(context.Background(), strings.ToUpper(name)+"_EVT"); err != nil {
			t.Errorf("deployment %s has no commit stream of its own: %v", name, err)
		}
	}
}

// removeDeploymentStreams deletes every stream of the named deployments.
func removeDeploymentStreams(t *testing.T, url string, names []string) {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	list := js.StreamNames(context.Background())
	var doomed []string
	for s := range list.Name() {
		for _, name := range names {
			if strings.HasPrefix(s, strings.ToUpper(name)+"_") {
				doomed = append(doomed, s)
			}
		}
	}
	for _, s := range doomed {
		if err := js.DeleteStream(context.Background(), s); err != nil {
			t.Errorf("cleanup: delete %s: %v", s, err)
		}
	}
}
