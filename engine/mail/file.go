package mail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"mime/quotedprintable"
	netmail "net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// fileSender writes each message as an RFC 5322 .eml file in dir.
type fileSender struct {
	dir  string
	from *netmail.Address
	now  func() time.Time

	mu  sync.Mutex
	seq int64 // last sequence number given out
}

// Send writes m to a new file <UTC time>-<sequence>.eml in the directory
// (made 0700 if missing; the file is 0600), whole or not at all, and logs the
// file and the recipient, never the body. Names sort by the injected clock,
// then by the order they were written in, across restarts too.
func (s *fileSender) Send(ctx context.Context, m Message) error {
	to, err := m.check()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.now()
	data, err := render(s.from, to, m, now, messageID(s.from))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("mail: %w", err)
	}
	name := now.UTC().Format("20060102T150405.000000000Z") + fmt.Sprintf("-%019d.eml", s.next())
	path := filepath.Join(s.dir, name)
	if err := writeFile(path, data); err != nil {
		return fmt.Errorf("mail: write %s: %w", path, err)
	}
	slog.Info("mail written", "file", path, "to", to.Address)
	return nil
}

// next returns a sequence number above every earlier one, from the real
// clock, so files written in one injected instant (a frozen test clock)
// still sort in the order they were written, even after a restart.
func (s *fileSender) next() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq = max(s.seq+1, time.Now().UnixNano())
	return s.seq
}

// writeFile writes data to a temporary file in path's directory, syncs it
// and renames it to path, so a reader sees a whole file or none.
func writeFile(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".mail-*.tmp") // 0600
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync() // the rename survives a crash; best effort
		_ = d.Close()
	}
	return nil
}

// render formats one message: CRLF lines, the Subject RFC 2047 encoded when
// not ASCII, the body quoted-printable.
func render(from, to *netmail.Address, m Message, now time.Time, id string) ([]byte, error) {
	var b bytes.Buffer
	h := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	h("Date", now.Format(time.RFC1123Z))
	h("From", from.String())
	h("To", to.String())
	if enc := mime.QEncoding.Encode("utf-8", m.Subject); enc == m.Subject {
		h("Subject", m.Subject)
	} else {
		// Each encoded word (75 characters at most) on a line of its own
		// keeps every line within 76.
		b.WriteString("Subject:\r\n " + strings.ReplaceAll(enc, "?= =?", "?=\r\n =?") + "\r\n")
	}
	h("Message-ID", "<"+id+">")
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	w := quotedprintable.NewWriter(&b)
	if _, err := io.WriteString(w, m.Text); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Latest reads the newest .eml file in dir addressed to `to` (compared case-
// insensitively; a bare address or a "Name <address>") and returns it decoded
// with its path: To is the bare address, Text has LF line ends. No such file:
// ErrNoMail.
func Latest(dir, to string) (Message, string, error) {
	want := to
	if a, err := netmail.ParseAddress(to); err == nil {
		want = a.Address
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Message{}, "", fmt.Errorf("%w: %s (no %s)", ErrNoMail, to, dir)
	}
	if err != nil {
		return Message{}, "", fmt.Errorf("mail: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".eml") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	for _, name := range slices.Backward(names) {
		path := filepath.Join(dir, name)
		m, err := readFile(path)
		if err != nil {
			return Message{}, path, err
		}
		if a, err := netmail.ParseAddress(m.To); err == nil && strings.EqualFold(a.Address, want) {
			m.To = a.Address
			return m, path, nil
		}
	}
	return Message{}, "", fmt.Errorf("%w: %s in %s", ErrNoMail, to, dir)
}

// readFile reads and decodes one .eml file.
func readFile(path string) (Message, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Message{}, fmt.Errorf("mail: %w", err)
	}
	msg, err := netmail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return Message{}, fmt.Errorf("mail: %s: %w", path, err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		return Message{}, fmt.Errorf("mail: %s: Subject: %w", path, err)
	}
	body := msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	text, err := io.ReadAll(body)
	if err != nil {
		return Message{}, fmt.Errorf("mail: %s: body: %w", path, err)
	}
	return Message{
		To:      msg.Header.Get("To"),
		Subject: subject,
		Text:    strings.ReplaceAll(string(text), "\r\n", "\n"),
	}, nil
}

// Token returns the value of the first token=<value> in text: the characters
// after "=" up to whitespace, '&', '"' or the end, as written (not URL-
// unescaped). A "token=" preceded by a letter, digit, '_' or '-' (as in
// "csrf_token=") is not one; an empty value is skipped.
func Token(text string) (string, bool) {
	const key = "token="
	for i := 0; ; {
		j := strings.Index(text[i:], key)
		if j < 0 {
			return "", false
		}
		start := i + j
		i = start + len(key)
		if start > 0 && isWordByte(text[start-1]) {
			continue
		}
		end := i
		for end < len(text) && !strings.ContainsRune(" \t\r\n\f\v&\"", rune(text[end])) {
			end++
		}
		if end > i {
			return text[i:end], true
		}
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
