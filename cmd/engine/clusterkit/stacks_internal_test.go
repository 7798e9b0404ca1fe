package clusterkit

import "testing"

// A goroutine dump is cut down to the engine's goroutines serving a request
// or blocked a minute or more, each as its header and the engine's own
// frames.
func TestStuckGoroutinesKeepsTheEnginesLongWaits(t *testing.T) {
	dump := "SIGQUIT: quit\nPC=0x1 m=0 sigcode=0\n\n" +
		"goroutine 7 [chan receive, 3 minutes]:\n" +
		"sync.(*Mutex).Lock(...)\n\t/usr/local/go/src/sync/mutex.go:1\n" +
		"github.com/svc/engine/gateway/firm.(*refs).lock(0x1)\n\tgateway/firm/refs.go:20 +0x1\n" +
		"github.com/svc/engine/gateway/firm.(*Handlers).ApplyBalance(0x1)\n\tgateway/firm/balance.go:85 +0x1\n\n" +
		"goroutine 8 [select]:\n" +
		"github.com/svc/engine/engine.(*Engine).run(0x1)\n\tengine/engine.go:1 +0x1\n\n" +
		"goroutine 10 gp=0x1 m=nil [select]:\n" +
		"github.com/svc/engine/gateway/api.(*Deps).Settle(0x1)\n\tgateway/api/api.go:350 +0x1\n" +
		"net/http.HandlerFunc.ServeHTTP(0x1)\n\tnet/http/server.go:1 +0x1\n" +
		"net/http.(*conn).serve(0x1)\n\tnet/http/server.go:2 +0x1\n" +
		"created by net/http.(*Server).Serve in goroutine 1\n\n" +
		"goroutine 9 [IO wait, 5 minutes]:\n" +
		"internal/poll.runtime_pollWait(0x1)\n\t/usr/local/go/src/runtime/netpoll.go:1 +0x1\n"
	got := stuckGoroutines(dump, 10)
	want := "goroutine 7 [chan receive, 3 minutes]:\n" +
		"    github.com/svc/engine/gateway/firm.(*refs).lock(0x1)\n" +
		"    github.com/svc/engine/gateway/firm.(*Handlers).ApplyBalance(0x1)\n" +
		"goroutine 10 gp=0x1 m=nil [select]:\n" +
		"    github.com/svc/engine/gateway/api.(*Deps).Settle(0x1)\n"
	if got != want {
		t.Fatalf("stuckGoroutines =\n%s\nwant\n%s", got, want)
	}
}
