package app

import (
	"io"
	"strings"
	"testing"
	"time"
)

// Snapshots are on by default every 10 s; ENGINE_SNAPSHOTS and
// ENGINE_SNAPSHOT_EVERY are checked at start, naming the variable.
func TestSnapshotSettings(t *testing.T) {
	parse := func(vars map[string]string) (Config, error) {
		return ParseConfig(nil, func(k string) string { return vars[k] }, io.Discard)
	}
	c, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Snapshots != "on" || c.SnapshotEvery != 10*time.Second || c.StreamsPerKey != 50 {
		t.Fatalf("defaults: snapshots %q every %s", c.Snapshots, c.SnapshotEvery)
	}
	if c, err = parse(map[string]string{"ENGINE_SNAPSHOTS": "off", "ENGINE_SNAPSHOT_EVERY": "1m"}); err != nil || c.Snapshots != "off" || c.SnapshotEvery != time.Minute {
		t.Fatalf("read %q %s, %v", c.Snapshots, c.SnapshotEvery, err)
	}
	for vars, want := range map[string]map[string]string{
		"ENGINE_SNAPSHOTS":       {"ENGINE_SNAPSHOTS": "yes"},
		"ENGINE_SNAPSHOT_EVERY":  {"ENGINE_SNAPSHOT_EVERY": "100ms"},
		"ENGINE_STREAMS_PER_KEY": {"ENGINE_STREAMS_PER_KEY": "0"},
	} {
		if _, err := parse(want); err == nil || !strings.Contains(err.Error(), vars) {
			t.Errorf("%v: %v, want an error naming %s", want, err, vars)
		}
	}
}
