package mail_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// smtpd is a tiny SMTP server on 127.0.0.1 for the sender's tests: EHLO,
// STARTTLS, AUTH PLAIN, MAIL, RCPT, DATA, RSET, NOOP and QUIT.
type smtpd struct {
	ln       net.Listener
	tls      *tls.Config
	startTLS bool   // offer STARTTLS on a plaintext connection
	user     string // non-empty: AUTH PLAIN with user and pass is required before MAIL
	pass     string
	stall    bool           // greet, then never answer
	Roots    *x509.CertPool // trusts the server's self-signed certificate

	mu       sync.Mutex
	sessions []*session
	wg       sync.WaitGroup // the accept loop and every connection
	conns    sync.WaitGroup // every connection
}

// session is what the server saw on one connection.
type session struct {
	Verbs     []string // every command's verb, in order
	TLSAtMail bool     // the connection was encrypted when MAIL came
	Authed    bool
	From      string // MAIL's argument
	Rcpts     []string
	Data      []byte
}

type smtpdOpts struct {
	startTLS   bool
	stall      bool
	implicit   bool // TLS from the first byte (smtps)
	user, pass string
}

func startSMTPD(t *testing.T, o smtpdOpts) *smtpd {
	t.Helper()
	cert, roots := selfSigned(t)
	s := &smtpd{
		tls:      &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		startTLS: o.startTLS, stall: o.stall, user: o.user, pass: o.pass, Roots: roots,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.implicit {
		ln = tls.NewListener(ln, s.tls)
	}
	s.ln = ln
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			s.conns.Add(1)
			go func() {
				defer s.wg.Done()
				defer s.conns.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.wg.Wait()
	})
	return s
}

// Port is the port the server listens on.
func (s *smtpd) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// waitClosed fails t unless every connection so far ends within d: the
// client closed it (a connection the client forgets ends only at the
// server's 10 s deadline).
func (s *smtpd) waitClosed(t *testing.T, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		s.conns.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("a connection still open after %v", d)
	}
}

// Sessions returns a copy of what the server saw so far.
func (s *smtpd) Sessions() []session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]session, len(s.sessions))
	for i, p := range s.sessions {
		out[i] = *p
		out[i].Verbs = slices.Clone(p.Verbs)
		out[i].Rcpts = slices.Clone(p.Rcpts)
	}
	return out
}

func (s *smtpd) serve(c net.Conn) {
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	sess := &session{}
	s.mu.Lock()
	s.sessions = append(s.sessions, sess)
	s.mu.Unlock()
	record := func(f func()) {
		s.mu.Lock()
		defer s.mu.Unlock()
		f()
	}
	_, encrypted := c.(*tls.Conn)
	authed := false
	tp := textproto.NewConn(c)
	reply := func(format string, args ...any) { _ = tp.PrintfLine(format, args...) }
	reply("220 127.0.0.1 ESMTP test")
	if s.stall {
		_, _ = io.Copy(io.Discard, c) // until the client hangs up
		return
	}
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		verb = strings.ToUpper(verb)
		record(func() { sess.Verbs = append(sess.Verbs, verb) })
		switch verb {
		case "EHLO":
			ext := []string{"127.0.0.1 hello"}
			if s.startTLS && !encrypted {
				ext = append(ext, "STARTTLS")
			}
			ext = append(ext, "AUTH PLAIN", "8BITMIME")
			for i, e := range ext {
				sep := "-"
				if i == len(ext)-1 {
					sep = " "
				}
				reply("250%s%s", sep, e)
			}
		case "HELO", "RSET", "NOOP":
			reply("250 2.0.0 ok")
		case "STARTTLS":
			if !s.startTLS || encrypted {
				reply("502 5.5.1 not offered")
				continue
			}
			reply("220 2.0.0 ready to start TLS")
			tc := tls.Server(c, s.tls)
			if err := tc.Handshake(); err != nil {
				return
			}
			c, tp, encrypted, authed = tc, textproto.NewConn(tc), true, false
		case "AUTH":
			mech, resp, _ := strings.Cut(arg, " ")
			if !strings.EqualFold(mech, "PLAIN") {
				reply("504 5.5.4 mechanism not supported")
				continue
			}
			if resp == "" {
				reply("334 ")
				if resp, err = tp.ReadLine(); err != nil {
					return
				}
			}
			got, err := base64.StdEncoding.DecodeString(resp)
			if err != nil || string(got) != "\x00"+s.user+"\x00"+s.pass {
				reply("535 5.7.8 authentication failed")
				continue
			}
			authed = true
			record(func() { sess.Authed = true })
			reply("235 2.7.0 authenticated")
		case "MAIL":
			if s.user != "" && !authed {
				reply("530 5.7.0 authentication required")
				continue
			}
			record(func() { sess.From, sess.TLSAtMail = arg, encrypted })
			reply("250 2.1.0 ok")
		case "RCPT":
			record(func() { sess.Rcpts = append(sess.Rcpts, arg) })
			reply("250 2.1.5 ok")
		case "DATA":
			reply("354 end with <CRLF>.<CRLF>")
			data, err := tp.ReadDotBytes()
			if err != nil {
				return
			}
			record(func() { sess.Data = data })
			reply("250 2.0.0 queued")
		case "QUIT":
			reply("221 2.0.0 bye")
			return
		default:
			reply("502 5.5.2 unknown command")
		}
	}
}

// selfSigned makes a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "engine mail test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

// smtpURL is the URL of the server with the given scheme and userinfo.
func (s *smtpd) smtpURL(scheme, user, pass string) string {
	if user == "" {
		return fmt.Sprintf("%s://127.0.0.1:%d", scheme, s.Port())
	}
	return fmt.Sprintf("%s://%s:%s@127.0.0.1:%d", scheme, user, pass, s.Port())
}
