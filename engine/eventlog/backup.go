package eventlog

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A backup file is the commit stream as JetStream's own snapshot makes it
// ($JS.API.STREAM.SNAPSHOT), framed so that one file is enough to restore:
//
//	engine-log-backup 1\n
//	{header: BackupInfo, the stream's config and state, as JSON}\n
//	the snapshot, as the server streamed it (s2-compressed)
//	\nend <20-digit size of the snapshot> <sha256 of the snapshot, hex>\n
//
// Restore checks the size and the digest before it sends the server a byte.

const backupMagic = "engine-log-backup 1\n"

// backupTrailerLen is the length of "\nend %020d %064x\n".
const backupTrailerLen = 1 + 4 + 20 + 1 + 64 + 1

// maxBackupHeader bounds the header line.
const maxBackupHeader = 1 << 20

// snapshotChunk is the chunk size asked of the server, and sent to it.
const snapshotChunk = 128 << 10

// apiTimeout bounds one JetStream API request; chunkTimeout one chunk of a
// snapshot or a restore; finishTimeout the server's end of a restore.
const (
	apiTimeout    = 10 * time.Second
	chunkTimeout  = 30 * time.Second
	finishTimeout = 10 * time.Minute
)

// ErrBadBackup means a file is not a whole backup: not one at all, truncated
// or altered.
var ErrBadBackup = errors.New("eventlog: not a whole backup")

// ErrRestoreRefused means the restore's target stream exists and may not be
// replaced: it holds commits, or something reads it.
var ErrRestoreRefused = errors.New("eventlog: restore refused")

// BackupInfo describes a backup: the stream as it was when its snapshot began.
type BackupInfo struct {
	Stream   string    `json:"stream"`
	LogID    string    `json:"logId,omitempty"` // "" for a log from before logs had ids
	FirstSeq uint64    `json:"firstSeq"`
	LastSeq  uint64    `json:"lastSeq"`
	Msgs     uint64    `json:"messages"` // the identity commit included
	Taken    time.Time `json:"taken"`
	Server   string    `json:"server"` // version of the nats-server that made the snapshot
	Size     int64     `json:"-"`      // bytes of the snapshot
}

type backupHeader struct {
	BackupInfo
	Config json.RawMessage `json:"config"` // the stream's config, as the server gave it
	State  json.RawMessage `json:"state"`
}

// streamState is the part of a JetStream StreamState a backup reads.
type streamState struct {
	Msgs     uint64 `json:"messages"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

type apiResponse struct {
	Error *jetstream.APIError `json:"error,omitempty"`
}

// api sends one JetStream API request and decodes the answer into resp,
// which embeds apiResponse; an error answer is a *jetstream.APIError.
func (l *Log) api(ctx context.Context, timeout time.Duration, subject string, req any, resp interface{ apiErr() error }) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := l.nc.RequestWithContext(rctx, "$JS.API."+subject, body)
	if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	if err := json.Unmarshal(m.Data, resp); err != nil {
		return fmt.Errorf("%s: answer %q: %w", subject, m.Data, err)
	}
	if err := resp.apiErr(); err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	return nil
}

func (r *apiResponse) apiErr() error {
	if r.Error != nil {
		return r.Error
	}
	return nil
}

// Backup writes a backup of the commit stream to w: JetStream's snapshot of
// the stream as of the call (commits appended meanwhile are not in it),
// without consumers. The log may be in use meanwhile; on the embedded server
// it is not, since Open locks the data directory. On an error w holds a
// partial backup, which Restore refuses.
func (l *Log) Backup(ctx context.Context, w io.Writer) (BackupInfo, error) {
	info := BackupInfo{Stream: l.name, LogID: l.id, Taken: time.Now().UTC(), Server: l.nc.ConnectedServerVersion()}
	inbox := l.nc.NewInbox()
	sub, err := l.nc.SubscribeSync(inbox) // before the request: chunks follow its answer at once
	if err != nil {
		return info, fmt.Errorf("eventlog: backup: %w", err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // the connection may be gone; nothing to do
	var resp struct {
		apiResponse
		Config json.RawMessage `json:"config"`
		State  json.RawMessage `json:"state"`
	}
	req := struct {
		DeliverSubject string `json:"deliver_subject"`
		NoConsumers    bool   `json:"no_consumers"`
		ChunkSize      int    `json:"chunk_size"`
	}{inbox, true, snapshotChunk}
	if err := l.api(ctx, apiTimeout, "STREAM.SNAPSHOT."+l.name, req, &resp); err != nil {
		return info, fmt.Errorf("eventlog: backup: %w", err)
	}
	var st streamState
	if err := json.Unmarshal(resp.State, &st); err != nil {
		return info, fmt.Errorf("eventlog: backup: stream state %q: %w", resp.State, err)
	}
	info.FirstSeq, info.LastSeq, info.Msgs = st.FirstSeq, st.LastSeq, st.Msgs
	head, err := json.Marshal(backupHeader{BackupInfo: info, Config: resp.Config, State: resp.State})
	if err != nil {
		return info, err
	}
	if _, err := io.WriteString(w, backupMagic); err != nil {
		return info, err
	}
	if _, err := w.Write(append(head, '\n')); err != nil {
		return info, err
	}
	sum := sha256.New()
	body := io.MultiWriter(w, sum)
	for {
		cctx, cancel := context.WithTimeout(ctx, chunkTimeout)
		m, err := sub.NextMsgWithContext(cctx)
		cancel()
		if err != nil {
			return info, fmt.Errorf("eventlog: backup: waiting for the snapshot's next chunk: %w", err)
		}
		if len(m.Data) == 0 { // the end: a bare status, 204 (or none) when whole
			if status := m.Header.Get("Status"); status != "" && status != "204" {
				return info, fmt.Errorf("eventlog: backup: the server ended the snapshot: %s %s", status, m.Header.Get("Description"))
			}
			break
		}
		if _, err := body.Write(m.Data); err != nil {
			return info, err
		}
		info.Size += int64(len(m.Data))
		if m.Reply != "" { // flow control: the server sends more as chunks are acknowledged
			if err := m.Respond(nil); err != nil {
				return info, fmt.Errorf("eventlog: backup: %w", err)
			}
		}
	}
	_, err = fmt.Fprintf(w, "\nend %020d %x\n", info.Size, sum.Sum(nil))
	return info, err
}

// backupFile is a checked backup: its header and where its snapshot lies.
type backupFile struct {
	backupHeader
	body *io.SectionReader
}

// ReadBackup reads and checks a backup (size and digest of its snapshot)
// without restoring it.
func ReadBackup(r io.ReaderAt, size int64) (BackupInfo, error) {
	b, err := readBackup(r, size)
	return b.BackupInfo, err
}

func readBackup(r io.ReaderAt, size int64) (backupFile, error) {
	var b backupFile
	br := bufio.NewReader(io.NewSectionReader(r, 0, min(size, int64(len(backupMagic))+maxBackupHeader)))
	magic, err := br.ReadString('\n')
	if err != nil || magic != backupMagic {
		return b, fmt.Errorf("%w: it does not start as one (%q)", ErrBadBackup, magic)
	}
	head, err := br.ReadBytes('\n')
	if err != nil {
		return b, fmt.Errorf("%w: header: %v", ErrBadBackup, err)
	}
	if err := json.Unmarshal(head, &b.backupHeader); err != nil {
		return b, fmt.Errorf("%w: header: %v", ErrBadBackup, err)
	}
	off := int64(len(magic) + len(head))
	if size < off+backupTrailerLen {
		return b, fmt.Errorf("%w: truncated", ErrBadBackup)
	}
	trailer := make([]byte, backupTrailerLen)
	if _, err := r.ReadAt(trailer, size-backupTrailerLen); err != nil {
		return b, fmt.Errorf("%w: %v", ErrBadBackup, err)
	}
	n, want, ok := parseTrailer(trailer)
	if !ok {
		return b, fmt.Errorf("%w: truncated (no end line)", ErrBadBackup)
	}
	if n != size-backupTrailerLen-off {
		return b, fmt.Errorf("%w: the snapshot is %d bytes, its end line says %d", ErrBadBackup, size-backupTrailerLen-off, n)
	}
	b.body = io.NewSectionReader(r, off, n)
	sum := sha256.New()
	if _, err := io.Copy(sum, b.body); err != nil {
		return b, fmt.Errorf("%w: %v", ErrBadBackup, err)
	}
	if !bytes.Equal(sum.Sum(nil), want) {
		return b, fmt.Errorf("%w: the snapshot's digest does not match its end line", ErrBadBackup)
	}
	if _, err := b.body.Seek(0, io.SeekStart); err != nil {
		return b, err
	}
	b.Size = n
	return b, nil
}

// parseTrailer reads "\nend <size> <sha256>\n".
func parseTrailer(t []byte) (int64, []byte, bool) {
	if !bytes.HasPrefix(t, []byte("\nend ")) || t[len(t)-1] != '\n' || t[25] != ' ' {
		return 0, nil, false
	}
	n, err := strconv.ParseInt(string(t[5:25]), 10, 64)
	if err != nil {
		return 0, nil, false
	}
	sum, err := hex.DecodeString(string(t[26 : len(t)-1]))
	if err != nil || len(sum) != sha256.Size {
		return 0, nil, false
	}
	return n, sum, true
}

// Restore restores a backup (r, size bytes long) into the log cfg names,
// through JetStream's stream restore ($JS.API.STREAM.RESTORE), and returns
// the restored stream's description. The stream keeps its sequences and its
// identity commit, so the restored log has the backed-up log's ID. The
// backup must be of cfg.Stream. Restore refuses (ErrRestoreRefused) a target
// stream that holds commits or has consumers; one that holds nothing but an
// identity commit is replaced. The stream takes cfg.Replicas, whatever the
// backed-up one had. On the embedded server the data directory is locked for
// the restore, as Open locks it.
func Restore(ctx context.Context, cfg Config, r io.ReaderAt, size int64) (BackupInfo, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return BackupInfo{}, err
	}
	b, err := readBackup(r, size)
	if err != nil {
		return BackupInfo{}, err
	}
	if b.Stream != cfg.Stream {
		return b.BackupInfo, fmt.Errorf("eventlog: the backup holds stream %s, not %s: restore it under its own name", b.Stream, cfg.Stream)
	}
	l, err := dial(cfg)
	if err != nil {
		return b.BackupInfo, err
	}
	defer l.Close()
	if err := l.clearForRestore(ctx); err != nil {
		return b.BackupInfo, err
	}
	// Snapshots of the history the restore replaces must not seed the restored one.
	if err := l.js.DeleteKeyValue(ctx, SnapshotBucket(cfg.Stream)); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return b.BackupInfo, fmt.Errorf("eventlog: delete the snapshots of the log the restore replaces: %w", err)
	}
	var sc map[string]json.RawMessage
	if err := json.Unmarshal(b.Config, &sc); err != nil {
		return b.BackupInfo, fmt.Errorf("%w: stream config: %v", ErrBadBackup, err)
	}
	sc["num_replicas"] = json.RawMessage(strconv.Itoa(cfg.Replicas))
	var resp struct {
		apiResponse
		DeliverSubject string `json:"deliver_subject"`
	}
	req := struct {
		Config map[string]json.RawMessage `json:"config"`
		State  json.RawMessage            `json:"state"`
	}{sc, b.State}
	if err := l.api(ctx, apiTimeout, "STREAM.RESTORE."+cfg.Stream, req, &resp); err != nil {
		return b.BackupInfo, fmt.Errorf("eventlog: restore: %w", err)
	}
	buf := make([]byte, min(snapshotChunk, max(1024, l.nc.MaxPayload()-1024)))
	for {
		n, rerr := io.ReadFull(b.body, buf)
		if n > 0 {
			if err := l.sendChunk(ctx, chunkTimeout, resp.DeliverSubject, buf[:n]); err != nil {
				return b.BackupInfo, err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return b.BackupInfo, fmt.Errorf("eventlog: restore: read the backup: %w", rerr)
		}
	}
	// An empty chunk ends the upload; the answer comes once the stream is in place.
	if err := l.sendChunk(ctx, finishTimeout, resp.DeliverSubject, nil); err != nil {
		return b.BackupInfo, err
	}
	if l.stream, err = l.js.Stream(ctx, cfg.Stream); err != nil {
		return b.BackupInfo, fmt.Errorf("eventlog: restored stream: %w", err)
	}
	if err := l.identify(ctx, true); err != nil {
		return b.BackupInfo, err
	}
	if l.id != b.LogID {
		return b.BackupInfo, fmt.Errorf("eventlog: the restored log's id is %q, the backup's %q", l.id, b.LogID)
	}
	return b.BackupInfo, nil
}

// clearForRestore makes way for a restore: no stream, or one with nothing
// but an identity commit and no consumers, which it deletes.
func (l *Log) clearForRestore(ctx context.Context) error {
	st, err := l.js.Stream(ctx, l.name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("eventlog: stream %s: %w", l.name, err)
	}
	l.stream = st
	info := st.CachedInfo()
	id, err := l.readID(ctx)
	if err != nil {
		return err
	}
	commits := info.State.Msgs
	if id != "" {
		commits--
	}
	if commits > 0 {
		return fmt.Errorf("%w: stream %s already holds %d commits (up to sequence %d); restore only into an empty log", ErrRestoreRefused, l.name, commits, info.State.LastSeq)
	}
	if info.State.Consumers > 0 {
		return fmt.Errorf("%w: stream %s is being read (%d consumers): is an engine running on it?", ErrRestoreRefused, l.name, info.State.Consumers)
	}
	if err := l.js.DeleteStream(ctx, l.name); err != nil {
		return fmt.Errorf("eventlog: delete the empty stream %s: %w", l.name, err)
	}
	return nil
}

// sendChunk sends one chunk of a restore and reads the server's answer: empty
// when the chunk is taken, an API error when the restore failed.
func (l *Log) sendChunk(ctx context.Context, timeout time.Duration, subject string, chunk []byte) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := l.nc.RequestWithContext(cctx, subject, chunk)
	if err != nil {
		return fmt.Errorf("eventlog: restore: %w", err)
	}
	if len(m.Data) == 0 {
		return nil
	}
	var resp apiResponse
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return fmt.Errorf("eventlog: restore: answer %q: %w", m.Data, err)
	}
	if err := resp.apiErr(); err != nil {
		return fmt.Errorf("eventlog: restore: %w", err)
	}
	return nil
}
