package mail_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/quotedprintable"
	netmail "net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine/mail"
)

// clock is the tests' frozen clock.
func clock() time.Time { return time.Date(2026, 3, 14, 15, 9, 26, 0, time.FixedZone("CET", 3600)) }

const (
	token   = "Zm9vYmFyLXNpbmdsZS11c2UtdG9rZW4tMTIzNDU2Nzg5MA"
	subject = "Vérifiez votre adresse e-mail ✓ — Trading Engine, a subject long enough to need more than one encoded word"
)

// text is a body with a link carrying the token past a soft line break, a
// '=' and non-ASCII text.
var text = "Bonjour Ann,\n\nconfirm your address (valid 24 h, ½ day = 12 h):\n" +
	"https://engine.example.com/account/verify-email?lang=fr&token=" + token + "\n\n" +
	"— Trading Engine\n"

func newFileSender(t *testing.T) (mail.Sender, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data", "mail") // not there yet
	s, err := mail.New(mail.Config{Dir: dir, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func TestFileRoundTrip(t *testing.T) {
	t.Parallel()
	s, dir := newFileSender(t)
	if err := s.Send(t.Context(), mail.Message{To: "Ann Trader <Ann.Trader@Example.com>", Subject: subject, Text: text}); err != nil {
		t.Fatal(err)
	}
	m, path, err := mail.Latest(dir, "ann.trader@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if m.To != "Ann.Trader@Example.com" || m.Subject != subject || m.Text != text {
		t.Fatalf("round trip changed the mail:\n got %+v\nwant To Ann.Trader@Example.com, Subject %q, Text %q", m, subject, text)
	}
	if got, ok := mail.Token(m.Text); !ok || got != token {
		t.Fatalf("Token = %q, %v; want %q", got, ok, token)
	}
	if filepath.Dir(path) != dir || !strings.HasPrefix(filepath.Base(path), "20260314T140926.000000000Z-") || filepath.Ext(path) != ".eml" {
		t.Fatalf("path %s: want <UTC time>-<seq>.eml in %s", path, dir)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Fatalf("%s: mode %v, %v; want %v", p, fi.Mode().Perm(), err, want)
		}
	}

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	h := msg.Header
	if d, err := h.Date(); err != nil || !d.Equal(clock()) {
		t.Errorf("Date %q: %v, %v", h.Get("Date"), d, err)
	}
	if from, err := netmail.ParseAddress(h.Get("From")); err != nil || from.Name != "Trading Engine" || from.Address != "no-reply@localhost" {
		t.Errorf("From %q: %v, %v", h.Get("From"), from, err)
	}
	if to, err := netmail.ParseAddress(h.Get("To")); err != nil || to.Name != "Ann Trader" || to.Address != "Ann.Trader@Example.com" {
		t.Errorf("To %q: %v, %v", h.Get("To"), to, err)
	}
	if id := h.Get("Message-Id"); !strings.HasPrefix(id, "<") || !strings.HasSuffix(id, "@localhost>") {
		t.Errorf("Message-ID %q", id)
	}
	if !strings.HasPrefix(h.Get("Subject"), "=?utf-8?q?") {
		t.Errorf("Subject %q is not RFC 2047 encoded", h.Get("Subject"))
	}
	if dec, err := new(mime.WordDecoder).DecodeHeader(h.Get("Subject")); err != nil || dec != subject {
		t.Errorf("Subject decodes to %q, %v", dec, err)
	}
	if h.Get("MIME-Version") != "1.0" || h.Get("Content-Transfer-Encoding") != "quoted-printable" {
		t.Errorf("MIME-Version %q, Content-Transfer-Encoding %q", h.Get("MIME-Version"), h.Get("Content-Transfer-Encoding"))
	}
	if mt, params, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "text/plain" || params["charset"] != "utf-8" {
		t.Errorf("Content-Type %q", h.Get("Content-Type"))
	}
	body, err := io.ReadAll(msg.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\r\n") {
		if len(line) > 78 {
			t.Errorf("line longer than 78: %q", line)
		}
	}
	if strings.Contains(string(body), token) {
		t.Error("the token should cross a soft line break in this body")
	}
	dec, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body)))
	if err != nil || strings.ReplaceAll(string(dec), "\r\n", "\n") != text {
		t.Errorf("body decodes to %q, %v", dec, err)
	}
}

func TestLatestIsNewestToThatAddress(t *testing.T) {
	t.Parallel()
	s, dir := newFileSender(t) // frozen clock: the order comes from the sequence
	for _, m := range []mail.Message{
		{To: "ann@example.com", Subject: "first", Text: "token=one"},
		{To: "ann@example.com", Subject: "second", Text: "token=two"},
		{To: "bob@example.com", Subject: "third", Text: "token=three"},
	} {
		if err := s.Send(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	if m, _, err := mail.Latest(dir, "ANN@example.com"); err != nil || m.Subject != "second" {
		t.Fatalf("Latest(ann) = %q, %v; want second", m.Subject, err)
	}
	if m, _, err := mail.Latest(dir, "Bob <bob@example.com>"); err != nil || m.Subject != "third" {
		t.Fatalf("Latest(bob) = %q, %v; want third", m.Subject, err)
	}
	if _, _, err := mail.Latest(dir, "carol@example.com"); !errors.Is(err, mail.ErrNoMail) {
		t.Fatalf("Latest(carol) err = %v; want ErrNoMail", err)
	}
	if _, _, err := mail.Latest(filepath.Join(dir, "nowhere"), "ann@example.com"); !errors.Is(err, mail.ErrNoMail) {
		t.Fatalf("Latest(missing dir) err = %v; want ErrNoMail", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Fatalf("%d entries in %s, want the 3 .eml files and no temporary file", len(entries), dir)
	}
}

// TestFileSenderLogs is not parallel: it swaps the default logger.
func TestFileSenderLogs(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	s, dir := newFileSender(t)
	if err := s.Send(t.Context(), mail.Message{To: "ann@example.com", Subject: "Verify", Text: text}); err != nil {
		t.Fatal(err)
	}
	_, path, err := mail.Latest(dir, "ann@example.com")
	if err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, `msg="mail written"`) || !strings.Contains(out, path) || !strings.Contains(out, "ann@example.com") {
		t.Fatalf("log %q: want one line naming %s and the recipient", out, path)
	}
	if strings.Contains(out, token) || strings.Contains(out, "Bonjour") {
		t.Fatalf("log %q shows the body", out)
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text, want string
		ok         bool
	}{
		{"https://x.example/verify?token=abc-123_X&lang=en", "abc-123_X", true},
		{`<a href="https://x.example/?token=abc">`, "abc", true},
		{"token=abc\nmore", "abc", true},
		{"token=end", "end", true},
		{"csrf_token=no then token=yes", "yes", true},
		{"token= token=v", "v", true},
		{"a token=", "", false},
		{"no token here", "", false},
	} {
		got, ok := mail.Token(c.text)
		if got != c.want || ok != c.ok {
			t.Errorf("Token(%q) = %q, %v; want %q, %v", c.text, got, ok, c.want, c.ok)
		}
	}
}

// TestHeaderInjectionRefused runs against both senders: the refusal comes
// before any file is written or any connection made (the SMTP sender points
// at a loopback port nothing listens on).
func TestHeaderInjectionRefused(t *testing.T) {
	t.Parallel()
	fs, dir := newFileSender(t)
	ss, err := mail.New(mail.Config{SMTPURL: "smtp://u:p@127.0.0.1:9", Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []mail.Message{
		{To: "ann@example.com\r\nBcc: eve@example.com", Subject: "s"},
		{To: "ann@example.com\nBcc: eve@example.com", Subject: "s"},
		{To: "ann@example.com", Subject: "s\r\nBcc: eve@example.com"},
		{To: "ann@example.com", Subject: "s\rX-Evil: 1"},
		{To: "ann@example.com", Subject: "s\x00"},
		{To: "ann@example.com", Subject: "s\xff"},
		{To: "ann\xff@example.com", Subject: "s"},
		{To: "not an address", Subject: "s"},
		{To: "ann@example.com, eve@example.com", Subject: "s"},
		{To: "", Subject: "s"},
		{To: "ann@example.com", Subject: "s", Text: "\xff"},
	} {
		for name, s := range map[string]mail.Sender{"file": fs, "smtp": ss} {
			if err := s.Send(t.Context(), m); !errors.Is(err, mail.ErrMessage) {
				t.Errorf("%s: Send(%q) err = %v; want ErrMessage", name, m, err)
			}
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused message touched %s: %v", dir, err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	const secret = "s3cretPass"
	for _, c := range []struct {
		name string
		cfg  mail.Config
		want []error // every one reported; nil: valid
	}{
		{"files", mail.Config{Dir: "/tmp/x"}, nil},
		{"starttls", mail.Config{SMTPURL: "smtp://user:" + secret + "@mail.example.com"}, nil},
		{"implicit tls", mail.Config{SMTPURL: "smtps://mail.example.com:2465", From: "Desk <desk@example.com>"}, nil},
		{"no dir", mail.Config{}, []error{mail.ErrNoDir}},
		{"bad scheme and no host", mail.Config{SMTPURL: "ftp://user:" + secret + "@"}, []error{mail.ErrScheme, mail.ErrNoHost}},
		{"no scheme", mail.Config{SMTPURL: "mail.example.com:587"}, []error{mail.ErrScheme, mail.ErrNoHost}},
		{"bad scheme and bad From", mail.Config{SMTPURL: "http://mail.example.com", From: "no address"}, []error{mail.ErrScheme, mail.ErrFrom}},
		{"From with a line break", mail.Config{Dir: "/tmp/x", From: "a@example.com\r\nBcc: eve@example.com"}, []error{mail.ErrFrom}},
		{"port 0", mail.Config{SMTPURL: "smtp://mail.example.com:0"}, []error{mail.ErrSMTPURL}},
		{"user without password", mail.Config{SMTPURL: "smtp://user@mail.example.com"}, []error{mail.ErrSMTPURL}},
		{"password without user", mail.Config{SMTPURL: "smtp://:" + secret + "@mail.example.com"}, []error{mail.ErrSMTPURL}},
		{"query", mail.Config{SMTPURL: "smtp://user:" + secret + "@mail.example.com/x?tls=off"}, []error{mail.ErrSMTPURL}},
		{"not a URL", mail.Config{SMTPURL: "smtp://user:" + secret + "%zz@mail.example.com"}, []error{mail.ErrSMTPURL}},
		{"ipv6 literal", mail.Config{SMTPURL: "smtp://[::1]:587"}, []error{mail.ErrSMTPURL}},
	} {
		s, err := mail.New(c.cfg)
		if c.want == nil {
			if err != nil || s == nil {
				t.Errorf("%s: New = %v, %v; want a sender", c.name, s, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: New succeeded; want %v", c.name, c.want)
			continue
		}
		for _, w := range c.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: err %q does not report %q", c.name, err, w)
			}
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: err %q shows the password", c.name, err)
		}
	}
}

// smtpSender makes a sender for srv that trusts its certificate.
func smtpSender(t *testing.T, url string, srv *smtpd) mail.Sender {
	t.Helper()
	s, err := mail.New(mail.Config{SMTPURL: url, Now: clock, RootCAs: srv.Roots})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sendCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSMTPStartTLS(t *testing.T) {
	t.Parallel()
	srv := startSMTPD(t, smtpdOpts{startTLS: true, user: "engine", pass: "pa55-word"})
	s := smtpSender(t, srv.smtpURL("smtp", "engine", "pa55-word"), srv)
	if err := s.Send(sendCtx(t), mail.Message{To: "Ann.Trader@example.com", Subject: subject, Text: text}); err != nil {
		t.Fatal(err)
	}
	sess := srv.Sessions()
	if len(sess) != 1 {
		t.Fatalf("%d connections, want 1", len(sess))
	}
	got := sess[0]
	verbs := strings.Join(got.Verbs, " ")
	if !strings.HasPrefix(verbs, "EHLO STARTTLS EHLO AUTH") || !strings.Contains(verbs, "MAIL RCPT DATA") || !strings.HasSuffix(verbs, "QUIT") {
		t.Errorf("commands %q: want STARTTLS, then AUTH, then the mail", verbs)
	}
	if !got.TLSAtMail || !got.Authed {
		t.Errorf("TLS at MAIL %v, authenticated %v; want both", got.TLSAtMail, got.Authed)
	}
	if !strings.Contains(got.From, "<no-reply@localhost>") || len(got.Rcpts) != 1 || !strings.Contains(got.Rcpts[0], "<Ann.Trader@example.com>") {
		t.Errorf("envelope MAIL %q RCPT %q", got.From, got.Rcpts)
	}
	checkWire(t, got.Data)
}

func TestSMTPImplicitTLS(t *testing.T) {
	t.Parallel()
	srv := startSMTPD(t, smtpdOpts{implicit: true, user: "engine", pass: "pa55-word"})
	s := smtpSender(t, srv.smtpURL("smtps", "engine", "pa55-word"), srv)
	if err := s.Send(sendCtx(t), mail.Message{To: "Ann.Trader@example.com", Subject: subject, Text: text}); err != nil {
		t.Fatal(err)
	}
	sess := srv.Sessions()
	if len(sess) != 1 || !sess[0].TLSAtMail || !sess[0].Authed || sess[0].Verbs[0] != "EHLO" || sess[0].Verbs[1] != "AUTH" {
		t.Fatalf("sessions %+v: want one, TLS from the start, authenticated", sess)
	}
	checkWire(t, sess[0].Data)
}

// checkWire checks a mail as the server received it.
func checkWire(t *testing.T, data []byte) {
	t.Helper()
	msg, err := netmail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	h := msg.Header
	if d, err := h.Date(); err != nil || !d.Equal(clock()) {
		t.Errorf("Date %q: %v", h.Get("Date"), err)
	}
	if to, err := netmail.ParseAddress(h.Get("To")); err != nil || to.Address != "Ann.Trader@example.com" {
		t.Errorf("To %q", h.Get("To"))
	}
	if from, err := netmail.ParseAddress(h.Get("From")); err != nil || from.Address != "no-reply@localhost" || from.Name != "Trading Engine" {
		t.Errorf("From %q", h.Get("From"))
	}
	if dec, err := new(mime.WordDecoder).DecodeHeader(h.Get("Subject")); err != nil || dec != subject {
		t.Errorf("Subject %q decodes to %q, %v", h.Get("Subject"), dec, err)
	}
	if h.Get("Message-Id") == "" || h.Get("MIME-Version") != "1.0" {
		t.Errorf("Message-ID %q, MIME-Version %q", h.Get("Message-Id"), h.Get("MIME-Version"))
	}
	if mt, params, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "text/plain" || !strings.EqualFold(params["charset"], "utf-8") {
		t.Errorf("Content-Type %q", h.Get("Content-Type"))
	}
	if !strings.EqualFold(h.Get("Content-Transfer-Encoding"), "quoted-printable") {
		t.Fatalf("Content-Transfer-Encoding %q", h.Get("Content-Transfer-Encoding"))
	}
	dec, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.ReplaceAll(string(dec), "\r\n", "\n")
	if strings.TrimRight(body, "\n") != strings.TrimRight(text, "\n") {
		t.Errorf("body %q, want %q", body, text)
	}
	if got, ok := mail.Token(body); !ok || got != token {
		t.Errorf("Token = %q, %v", got, ok)
	}
}

func TestSMTPWithoutSTARTTLSRefused(t *testing.T) {
	t.Parallel()
	srv := startSMTPD(t, smtpdOpts{startTLS: false, user: "engine", pass: "pa55-word"})
	s := smtpSender(t, srv.smtpURL("smtp", "engine", "pa55-word"), srv)
	err := s.Send(sendCtx(t), mail.Message{To: "ann@example.com", Subject: "Verify", Text: text})
	if err == nil {
		t.Fatal("sent over a connection without STARTTLS")
	}
	t.Log(err)
	if strings.Contains(err.Error(), "pa55-word") {
		t.Errorf("err %q shows the password", err)
	}
	srv.waitClosed(t, 5*time.Second)
	for _, sess := range srv.Sessions() {
		for _, v := range sess.Verbs {
			if v == "AUTH" || v == "MAIL" || v == "DATA" {
				t.Fatalf("the sender went on in plaintext: %q", sess.Verbs)
			}
		}
	}
}

func TestSMTPUntrustedCertificateRefused(t *testing.T) {
	t.Parallel()
	srv := startSMTPD(t, smtpdOpts{startTLS: true, user: "engine", pass: "pa55-word"})
	s, err := mail.New(mail.Config{SMTPURL: srv.smtpURL("smtp", "engine", "pa55-word"), Now: clock}) // system roots
	if err != nil {
		t.Fatal(err)
	}
	err = s.Send(sendCtx(t), mail.Message{To: "ann@example.com", Subject: "Verify", Text: text})
	if err == nil {
		t.Fatal("sent to a server whose certificate nothing trusts")
	}
	t.Log(err)
	for _, sess := range srv.Sessions() {
		if sess.Authed || sess.From != "" {
			t.Fatalf("the sender went on after a failed handshake: %q", sess.Verbs)
		}
	}
}

func TestSMTPWrongPasswordNotShown(t *testing.T) {
	t.Parallel()
	srv := startSMTPD(t, smtpdOpts{startTLS: true, user: "engine", pass: "right-one"})
	s := smtpSender(t, srv.smtpURL("smtp", "engine", "Wr0ngPa55"), srv)
	err := s.Send(sendCtx(t), mail.Message{To: "ann@example.com", Subject: "Verify", Text: text})
	if err == nil {
		t.Fatal("sent with a wrong password")
	}
	t.Log(err)
	if strings.Contains(err.Error(), "Wr0ngPa55") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("err %q: want the server named and the password not", err)
	}
}

// TestConcurrentSends: both senders take concurrent sends, each whole.
func TestConcurrentSends(t *testing.T) {
	t.Parallel()
	const n = 8
	srv := startSMTPD(t, smtpdOpts{startTLS: true, user: "engine", pass: "pa55-word"})
	fs, dir := newFileSender(t)
	ss := smtpSender(t, srv.smtpURL("smtp", "engine", "pa55-word"), srv)
	for name, s := range map[string]mail.Sender{"file": fs, "smtp": ss} {
		errs := make(chan error, n)
		for i := range n {
			go func() {
				errs <- s.Send(sendCtx(t), mail.Message{To: fmt.Sprintf("u%d@example.com", i), Subject: "Verify", Text: fmt.Sprintf("token=t%d", i)})
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	for i := range n {
		m, _, err := mail.Latest(dir, fmt.Sprintf("u%d@example.com", i))
		if tok, _ := mail.Token(m.Text); err != nil || tok != fmt.Sprintf("t%d", i) {
			t.Fatalf("file %d: %q, %v", i, m.Text, err)
		}
	}
	got := map[string]bool{}
	for _, sess := range srv.Sessions() {
		if len(sess.Data) > 0 && sess.TLSAtMail && len(sess.Rcpts) == 1 {
			got[sess.Rcpts[0]] = true
		}
	}
	if len(got) != n {
		t.Fatalf("the server received %d whole mails over TLS, want %d: %v", len(got), n, got)
	}
}

// TestSMTPContextEndsSend: a server that stops answering holds a send only
// until its context ends, not for the whole Timeout.
func TestSMTPContextEndsSend(t *testing.T) {
	t.Parallel()
	srv := startSMTPD(t, smtpdOpts{startTLS: true, stall: true})
	s := smtpSender(t, srv.smtpURL("smtp", "", ""), srv)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Send(ctx, mail.Message{To: "ann@example.com", Subject: "Verify", Text: text})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want the context's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Send took %v after its context ended", d)
	}
	srv.waitClosed(t, 5*time.Second)
}
