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
	for i := range n {
		if _, err := js.PublishAsync(fmt.Sprintf("evt.other.%d", i), data); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		t.Fatal("the log was not written in 60 s")
	}
	if last, err := l.LastSeq(ctx); err != nil || last != before+uint64(n) {
		t.Fatalf("the log holds %d commits (%v), want %d", last, err, before+uint64(n))
	}
}
