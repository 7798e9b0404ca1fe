package mail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	netmail "net/mail"
	"strconv"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// smtpSender delivers each message over its own SMTP connection, always
// encrypted: STARTTLS is mandatory for smtp:// (a server that does not offer
// it is refused, never spoken to in plaintext), smtps:// is TLS from the
// first byte. The server's certificate is verified for its host name.
type smtpSender struct {
	client *gomail.Client // safe for concurrent use; dials per DialAndSend
	addr   string         // host:port, for errors and logs
	pass   string         // redacted from errors
	tls    *tls.Config
	smtps  bool
	from   *netmail.Address
	now    func() time.Time
}

func newSMTPSender(t smtpTarget, from *netmail.Address, now func() time.Time, roots *x509.CertPool) (*smtpSender, error) {
	s := &smtpSender{
		addr:  net.JoinHostPort(t.host, strconv.Itoa(t.port)),
		pass:  t.pass,
		tls:   &tls.Config{ServerName: t.host, MinVersion: tls.VersionTLS12, RootCAs: roots},
		smtps: t.implicitTLS,
		from:  from,
		now:   now,
	}
	opts := []gomail.Option{
		gomail.WithPort(t.port),
		gomail.WithTimeout(Timeout),
		gomail.WithTLSConfig(s.tls),
		gomail.WithDialContextFunc(s.dial),
	}
	if t.implicitTLS {
		opts = append(opts, gomail.WithSSL())
	} else {
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if t.user != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthPlain), gomail.WithUsername(t.user), gomail.WithPassword(t.pass))
	}
	c, err := gomail.NewClient(t.host, opts...)
	if err != nil {
		return nil, redact(fmt.Errorf("mail: smtp client for %s: %w", s.addr, err), t.pass)
	}
	s.client = c
	return s, nil
}

// Send delivers m within ctx and Timeout. Its error names the server, never
// the password.
func (s *smtpSender) Send(ctx context.Context, m Message) error {
	to, err := m.check()
	if err != nil {
		return err
	}
	msg := gomail.NewMsg(gomail.WithCharset(gomail.CharsetUTF8), gomail.WithEncoding(gomail.EncodingQP), gomail.WithNoDefaultUserAgent())
	msg.FromMailAddress(s.from)
	msg.AddToMailAddress(to)
	msg.Subject(m.Subject)
	msg.SetDateWithValue(s.now())
	msg.SetMessageIDWithValue(messageID(s.from))
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	// go-mail leaves the connection open when it refuses a server (no
	// STARTTLS): the conn is closed here, whatever happened, and at once
	// should ctx end mid-conversation.
	c := &conn{}
	stop := context.AfterFunc(ctx, c.close)
	defer stop()
	defer c.close()
	if err := s.client.DialAndSendWithContext(context.WithValue(ctx, connKey{}, c), msg); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return redact(fmt.Errorf("mail: send to %s via %s: %w", to.Address, s.addr, err), s.pass)
	}
	slog.Info("mail sent", "server", s.addr, "to", to.Address)
	return nil
}

// dial is go-mail's dialer: TCP, or TLS for smtps (go-mail runs STARTTLS
// itself), handing the connection to the Send that asked for it.
func (s *smtpSender) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{}
	var nc net.Conn
	var err error
	if s.smtps {
		nc, err = (&tls.Dialer{NetDialer: d, Config: s.tls}).DialContext(ctx, network, addr)
	} else {
		nc, err = d.DialContext(ctx, network, addr)
	}
	if err != nil {
		return nil, err
	}
	if c, ok := ctx.Value(connKey{}).(*conn); ok && !c.set(nc) {
		_ = nc.Close()
		return nil, net.ErrClosed
	}
	return nc, nil
}

type connKey struct{}

// conn holds one Send's connection so that Send can close it.
type conn struct {
	mu     sync.Mutex
	nc     net.Conn
	closed bool
}

// set holds nc, or reports false if the Send is already over.
func (c *conn) set(nc net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.nc = nc
	return true
}

func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.nc != nil {
		_ = c.nc.Close() // after a QUIT, already closed
	}
}

// redact returns err, or, should its text hold the password (a server echoing
// it back), an error with the password cut out and the chain dropped.
func redact(err error, pass string) error {
	if pass == "" || !strings.Contains(err.Error(), pass) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pass, "[redacted]"))
}
