package app_test

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/engine/eventlog"
)

// A log holding a commit this build cannot read (by hand, or from a newer
// build) is never skipped: the engine refuses to start and names the subject
// and the sequence, so an operator can look at it with `engine log`.
func TestStartRefusesALogWithAnUnreadableCommitNamingIt(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	dir := e.DataDir
	e.Stop()

	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Config{DataDir: dir, Sync: "always", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := l.Append(ctx, "evt.account.poisoned", 0, "poison-1", []byte(`{"id":"x","events":[{"type":"account.from_the_future.v9","data":{}}]}`))
	l.Close()
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := app.ParseConfig(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = dir
	a, err := app.Start(ctx, cfg, app.Options{ManualFeed: true})
	if err == nil {
		a.Close()
		t.Fatal("the engine started on a log it cannot read")
	}
	t.Logf("start refused: %v", err)
	for _, want := range []string{"evt.account.poisoned", "at " + strconv.FormatUint(seq, 10)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start error %q does not name %q", err, want)
		}
	}
}
