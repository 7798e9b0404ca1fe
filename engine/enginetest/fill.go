package enginetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svc/engine/engine/eventlog"
)

// FillLog writes n copies of data to l on subjects evt.other.0 to n-1 (no
// aggregate reads them; a replay still decodes each), published without
// waiting for each ack: an embedded server under the race detector takes
// about 20 s for 60,000 appends made one at a time.
func FillLog(t testing.TB, l *eventlog.Log, n int, data []byte) {
	t.Helper()
	ctx := context.Background()
	before, err := l.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	js := l.JetStream()
	const window = 1000 // below the client's bound of outstanding publishes, which fails a publish past it
	for i := 0; i < n; i += window {
		for j := i; j < min(n, i+window); j++ {
			if _, err := js.PublishAsync(fmt.Sprintf("evt.other.%d", j), data); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			t.Fatal("1,000 publishes not acknowledged in 30 s")
		}
	}
	if last, err := l.LastSeq(ctx); err != nil || last != before+uint64(n) {
		t.Fatalf("the log holds %d commits (%v), want %d", last, err, before+uint64(n))
	}
}
