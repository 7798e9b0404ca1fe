package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// engine log prints every commit as a JSON line, whichever encoding it was
// written in (a MessagePack commit and one in the JSON of earlier versions),
// and narrows to one aggregate, a sequence and a count when asked.
func TestDumpLogPrintsCommitsAsJSONLines(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := eventlog.Open(ctx, eventlog.Config{DataDir: dir, Sync: "always", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	binary, err := engine.Registry().Encode(events.Commit{CommandID: "01KCMD0000000000000000000A", Key: "c-1",
		Principal: events.Principal{TenantID: "demo"}, At: at,
		Events: []events.Event{evacct.OrderCanceled{BrokerOrderID: "o1", Reason: "requested", At: at}}})
	if err != nil {
		t.Fatal(err)
	}
	legacy := []byte(`{"id":"01KCMD0000000000000000000B","principal":{},"at":"2026-11-23T09:00:01Z","events":[{"type":"account.balance_changed.v1","data":{"referenceId":"r1","op":"credit","amount":"100.50","balance":"50100.5","at":"2026-11-23T09:00:01Z"}}]}`)
	for i, c := range []struct {
		subject  string
		expected uint64 // the subject's last sequence before this commit
		data     []byte
	}{{"evt.account.a1", 0, binary}, {"evt.account.a2", 0, legacy}, {"evt.account.a1", 2, binary}} { // 1 is the identity commit
		if _, err := l.Append(ctx, c.subject, c.expected, fmt.Sprint("append-", i), c.data); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()

	dump := func(args ...string) []dumpedCommitJSON {
		t.Helper()
		var out, errOut bytes.Buffer
		getenv := func(k string) string {
			if k == "ENGINE_DATA_DIR" {
				return dir
			}
			return ""
		}
		if err := DumpLog(ctx, args, getenv, &out, &errOut); err != nil {
			t.Fatalf("engine log %v: %v (%s)", args, err, errOut.String())
		}
		var got []dumpedCommitJSON
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if line == "" {
				continue
			}
			var c dumpedCommitJSON
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			got = append(got, c)
		}
		return got
	}
	all := dump()
	if len(all) != 4 || all[0].Seq != 1 || all[1].Seq != 2 || all[2].Seq != 3 || all[3].Seq != 4 {
		t.Fatalf("engine log printed %+v, want the identity commit and the 3 commits in order", all)
	}
	if c := all[0]; c.Subject != "evt.log" || c.ID == "" || len(c.Events) != 0 {
		t.Errorf("identity commit printed as %+v", c)
	}
	all = all[1:]
	if c := all[0]; c.Subject != "evt.account.a1" || c.ID != "01KCMD0000000000000000000A" || c.Key != "c-1" ||
		len(c.Events) != 1 || c.Events[0].Type != "order.canceled.v1" || c.Events[0].Data["brokerOrderId"] != "o1" {
		t.Errorf("MessagePack commit printed as %+v", c)
	}
	if c := all[1]; c.ID != "01KCMD0000000000000000000B" || len(c.Events) != 1 ||
		c.Events[0].Type != "account.balance_changed.v1" || c.Events[0].Data["amount"] != "100.5" {
		t.Errorf("JSON commit printed as %+v", c)
	}
	if got := dump("-subject", "evt.account.a1"); len(got) != 2 || got[0].Seq != 2 || got[1].Seq != 4 {
		t.Errorf("-subject printed %+v", got)
	}
	if got := dump("-after", "2", "-limit", "1"); len(got) != 1 || got[0].Seq != 3 {
		t.Errorf("-after 2 -limit 1 printed %+v", got)
	}
	// Only one process opens an embedded log: not while another has it.
	held, err := eventlog.Open(ctx, eventlog.Config{DataDir: dir, Sync: "always", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	err = DumpLog(ctx, []string{"-data-dir", dir}, func(string) string { return "" }, io.Discard, &errOut)
	held.Close()
	if !errors.Is(err, eventlog.ErrLocked) {
		t.Errorf("engine log beside an open log: %v, want ErrLocked", err)
	}
	empty := t.TempDir()
	var out bytes.Buffer
	if err := DumpLog(ctx, []string{"-data-dir", empty}, func(string) string { return "" }, &out, &out); err == nil {
		t.Error("engine log on a directory without a log succeeded")
	}
	if _, err := os.Stat(filepath.Join(empty, "nats")); err == nil {
		t.Error("engine log made a log where there was none")
	}
}

type dumpedCommitJSON struct {
	Seq     uint64 `json:"seq"`
	Subject string `json:"subject"`
	ID      string `json:"id"`
	Key     string `json:"key"`
	Events  []struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	} `json:"events"`
}
