package apptest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATS starts a JetStream nats-server of go.mod's version inside the test
// process, listening on a free port of 127.0.0.1 (never the machine's own
// server), with its store in a temporary directory; it is shut down at the
// test's end. It answers the URL engines reach it on (Config.NatsURL).
func NATS(t testing.TB) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}
