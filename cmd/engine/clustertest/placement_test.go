package clustertest

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/clusterkit"
)

// An engine started while its NATS cluster has lost its quorum (two of the
// three servers down for a restart: the third answers "JetStream system
// temporarily unavailable" or nothing) waits for the cluster instead of
// exiting, and serves once the servers are back.
func TestEngineStartsWhenTheClusterReturns(t *testing.T) {
	root := t.TempDir()
	n := clusterkit.StartNATS(t, filepath.Join(root, "nats"))
	clusterkit.EngineBinary(t) // built before the clock below starts
	n.Term(1)
	n.Term(2)
	// Longer than the four timeouts an engine used to allow before it gave up.
	back := n.StartIn(12*time.Second, 1, 2)
	e := clusterkit.StartEngine(t, clusterkit.EngineOptions{NATSURLs: n.URLs(), Deployment: clusterkit.NewDeployment(),
		Dir: filepath.Join(root, "engine"), Env: map[string]string{"ENGINE_DEMO_ACCOUNTS": "1"}})
	back()
	if !strings.Contains(e.Log(), "not whole yet") {
		t.Fatalf("the engine never met the cluster without its quorum, so this test proved nothing; its log:\n%s", e.Log())
	}
	c := readCreds(t, filepath.Join(root, "engine"))
	code, b, err := call(e.URL(), c.TradingKey, "POST", "/api/trading/order?account="+c.Accounts[0].AccountNumber,
		map[string]any{"clientOrderId": "after-the-quorum", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"})
	if err != nil || code != http.StatusOK {
		t.Fatalf("order once the cluster is back: %d %s %v", code, b, err)
	}
}
