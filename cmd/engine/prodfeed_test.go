package main_test

import (
	"strings"
	"testing"

	"github.com/svc/engine/engine/seal"
)

// A production engine never trades on invented prices unless told to: with
// no ENGINE_MARKET_FEED it refuses to start and says which setting to give;
// with ENGINE_MARKET_FEED=simulated it starts and says loudly, at start,
// that its prices are simulated.
func TestProductionNeedsAFeedSetting(t *testing.T) {
	bin := build(t)
	keys, err := seal.NewKeySetting("k1") // production needs it too; this test is about the feed
	if err != nil {
		t.Fatal(err)
	}
	out, code := run(t, bin, []string{"ENGINE_ENV=production", "ENGINE_MARKET_FEED=", "ENGINE_SEAL_KEYS=" + keys, "ENGINE_DATA_DIR=" + t.TempDir(), "ENGINE_LISTEN=" + freePort(t)})
	wantRefused(t, "a production start without a feed setting", out, code, "ENGINE_MARKET_FEED", "coinbase", "simulated")

	p := start(t, bin, t.TempDir(), freePort(t), "ENGINE_ENV=production", "ENGINE_MARKET_FEED=simulated", "ENGINE_SEAL_KEYS="+keys)
	log := p.out.String()
	if !strings.Contains(log, `"level":"WARN"`) || !strings.Contains(log, "ENGINE_MARKET_FEED=simulated in production") {
		t.Fatalf("a simulated production feed is not said at start:\n%s", log)
	}
	stop(t, p)
}
