package eventlog

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// memDir is where the embedded server stages atomic batches when it can: a
// memory file system (tmpfs on Linux). Empty or missing: staged on disk.
var memDir = "/dev/shm"

// stageBatchesInMemory points the embedded server's staging of atomic
// batches for the stream at a directory in memory.
//
// nats-server stages every atomic batch of a one-replica file stream in a
// file store of its own under <stream>/batches (a directory made, a metadata
// file written and synced, a block written, all removed after the commit),
// so that a server that dies while copying a batch into the stream can copy
// the rest at its next start. That costs 15-20% of the engine's CPU under
// load and there is no setting for it. Our batches need none of it: a batch
// is group commit only, each member a commit of its own with its own guard
// and dedupe id, none acknowledged before the whole batch is, and a member
// refused is published again alone (group.go). In memory the staging is as
// cheap as a replicated stream's; it survives the engine's own crash (kill
// -9: the next start finishes a partly copied batch as before), and only a
// crash of the machine mid-copy loses it, leaving a durable prefix of an
// unacknowledged batch: commits each whole and guarded, which a client's
// retry finds by its idempotency key as after any lost answer.
//
// It runs after the server has started (its recovery of a partly copied
// batch has run and removed the old link) and before the first batch. Any
// failure leaves the staging on disk, as nats-server does it.
func stageBatchesInMemory(storeDir, stream string) (string, error) {
	if memDir == "" {
		return "", nil
	}
	if st, err := os.Stat(memDir); err != nil || !st.IsDir() {
		return "", nil // no memory file system here
	}
	streamDir := filepath.Join(storeDir, "jetstream", "$G", "streams", stream)
	if st, err := os.Stat(streamDir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("eventlog: stream directory %s: %w", streamDir, errOrNotDir(err))
	}
	abs, err := filepath.Abs(streamDir)
	if err != nil {
		return "", fmt.Errorf("eventlog: %w", err)
	}
	sum := sha256.Sum256([]byte(abs))
	target := filepath.Join(memDir, "engine-batches-"+hex.EncodeToString(sum[:8]))
	link := filepath.Join(streamDir, "batches")
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return target, nil
	}
	// No batch is being staged: the server has started and nothing has
	// published one yet. What the link or directory held is done with.
	if err := os.RemoveAll(link); err != nil {
		return "", fmt.Errorf("eventlog: %w", err)
	}
	if err := os.RemoveAll(target); err != nil {
		return "", fmt.Errorf("eventlog: %w", err)
	}
	if err := os.MkdirAll(target, 0o700); err != nil {
		return "", fmt.Errorf("eventlog: %w", err)
	}
	if err := os.Symlink(target, link); err != nil {
		_ = os.RemoveAll(target)
		return "", fmt.Errorf("eventlog: %w", err)
	}
	return target, nil
}

// unstageBatches removes the link and its directory in memory after a clean
// stop (no batch is staged then).
func unstageBatches(storeDir, stream, target string) {
	if target == "" {
		return
	}
	link := filepath.Join(storeDir, "jetstream", "$G", "streams", stream, "batches")
	if cur, err := os.Readlink(link); err == nil && cur == target {
		_ = os.Remove(link)
	}
	_ = os.RemoveAll(target)
}

func errOrNotDir(err error) error {
	if err != nil {
		return err
	}
	return errors.New("not a directory")
}
