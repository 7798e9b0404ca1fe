// Package mail sends the engine's plain-text mail: over SMTP with TLS when
// ENGINE_SMTP_URL is set, or else as .eml files in a directory, which Latest
// reads back (the sandbox and tests read tokens out of them).
package mail

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	netmail "net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Sentinels name the failure; every error New or Send returns for a bad
// config or message wraps one of them.
var (
	ErrSMTPURL = errors.New("mail: ENGINE_SMTP_URL is not smtp://user:pass@host:port or smtps://user:pass@host:port")
	ErrScheme  = errors.New("mail: ENGINE_SMTP_URL scheme is neither smtp nor smtps")
	ErrNoHost  = errors.New("mail: ENGINE_SMTP_URL has no host")
	ErrFrom    = errors.New("mail: invalid From address")
	ErrNoDir   = errors.New("mail: no mail directory")
	ErrMessage = errors.New("mail: message refused")
	ErrNoMail  = errors.New("mail: no mail to that address")
)

// DefaultFrom is the From address when Config.From is empty.
const DefaultFrom = "Trading Engine <no-reply@localhost>"

// Timeout bounds one SMTP delivery: dial, TLS, AUTH and the transfer.
const Timeout = 10 * time.Second

// Message is one plain-text mail.
type Message struct {
	To      string // one address
	Subject string
	Text    string // the body, plain UTF-8 text
}

// Sender sends mail. Send refuses (ErrMessage) a message whose To or Subject
// could inject a header; it is safe for concurrent use.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// Config selects the sender.
type Config struct {
	SMTPURL string           // ENGINE_SMTP_URL: smtp://user:pass@host:587 (STARTTLS required) or smtps://user:pass@host:465 (implicit TLS); empty: files
	Dir     string           // where files go when SMTPURL is empty: $ENGINE_DATA_DIR/mail
	From    string           // the From address; empty: "Trading Engine <no-reply@localhost>"
	Now     func() time.Time // the Date header and file names; nil: time.Now
	// RootCAs, if set, replaces the system roots the SMTP server's
	// certificate is verified against: for tests and private CAs.
	RootCAs *x509.CertPool
}

// smtpTarget is a parsed ENGINE_SMTP_URL.
type smtpTarget struct {
	implicitTLS bool // smtps://
	host        string
	port        int
	user, pass  string // user == "": no AUTH
}

// New validates cfg, reporting every problem at once (errors.Join), and
// returns the SMTP sender when cfg.SMTPURL is set, else the file sender. No
// error and no log line carries the SMTP password.
func New(cfg Config) (Sender, error) {
	var errs []error
	from, err := parseFrom(cfg.From)
	if err != nil {
		errs = append(errs, err)
	}
	var target smtpTarget
	if cfg.SMTPURL != "" {
		target, err = parseSMTPURL(cfg.SMTPURL)
		if err != nil {
			errs = append(errs, err)
		}
	} else if cfg.Dir == "" {
		errs = append(errs, fmt.Errorf("%w: set ENGINE_SMTP_URL, or a data directory for .eml files", ErrNoDir))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	if cfg.SMTPURL != "" {
		return newSMTPSender(target, from, now, cfg.RootCAs)
	}
	return &fileSender{dir: cfg.Dir, from: from, now: now}, nil
}

func parseFrom(s string) (*netmail.Address, error) {
	if s == "" {
		s = DefaultFrom
	}
	if err := checkHeader(s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFrom, err)
	}
	a, err := netmail.ParseAddress(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrFrom, s, err)
	}
	return a, nil
}

// parseSMTPURL parses ENGINE_SMTP_URL. Its errors name the scheme, host and
// port at most, never the userinfo.
func parseSMTPURL(s string) (smtpTarget, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Parse's error quotes the URL, password included.
		return smtpTarget{}, fmt.Errorf("%w: not a URL", ErrSMTPURL)
	}
	var t smtpTarget
	var errs []error
	switch u.Scheme {
	case "smtp":
		t.port = 587
	case "smtps":
		t.implicitTLS, t.port = true, 465
	default:
		errs = append(errs, fmt.Errorf("%w (%q)", ErrScheme, u.Scheme))
	}
	t.host = u.Hostname()
	switch {
	case t.host == "":
		errs = append(errs, ErrNoHost)
	case strings.Contains(t.host, ":"):
		errs = append(errs, fmt.Errorf("%w: an IPv6 literal host is not supported; use a name", ErrSMTPURL))
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			errs = append(errs, fmt.Errorf("%w: port %q is not 1..65535", ErrSMTPURL, p))
		}
		t.port = n
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		errs = append(errs, fmt.Errorf("%w: it takes no path, query or fragment", ErrSMTPURL))
	}
	if u.User != nil {
		t.user = u.User.Username()
		t.pass, _ = u.User.Password()
		if t.user == "" || t.pass == "" {
			errs = append(errs, fmt.Errorf("%w: the userinfo needs both a user and a password", ErrSMTPURL))
		}
	}
	return t, errors.Join(errs...)
}

// checkHeader refuses a header value that could inject another header or is
// not UTF-8: line breaks and every other control character but tab.
func checkHeader(v string) error {
	if !utf8.ValidString(v) {
		return errors.New("not valid UTF-8")
	}
	for _, r := range v {
		if r == '\r' || r == '\n' {
			return errors.New("contains a line break")
		}
		if r != '\t' && unicode.IsControl(r) {
			return errors.New("contains a control character")
		}
	}
	return nil
}

// check validates m and returns its parsed recipient.
func (m Message) check() (*netmail.Address, error) {
	if err := checkHeader(m.To); err != nil {
		return nil, fmt.Errorf("%w: To %v", ErrMessage, err)
	}
	if err := checkHeader(m.Subject); err != nil {
		return nil, fmt.Errorf("%w: Subject %v", ErrMessage, err)
	}
	if !utf8.ValidString(m.Text) {
		return nil, fmt.Errorf("%w: Text is not valid UTF-8", ErrMessage)
	}
	to, err := netmail.ParseAddress(m.To)
	if err != nil {
		return nil, fmt.Errorf("%w: To %q: %v", ErrMessage, m.To, err)
	}
	return to, nil
}

// messageID makes a Message-ID in the From address's domain.
func messageID(from *netmail.Address) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	domain := "localhost"
	if i := strings.LastIndexByte(from.Address, '@'); i >= 0 && i+1 < len(from.Address) {
		domain = from.Address[i+1:]
	}
	return hex.EncodeToString(b[:]) + "@" + domain
}
