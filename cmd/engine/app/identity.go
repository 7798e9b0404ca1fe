package app

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/svc/engine/engine/mail"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/identity"
)

// sessionKeys are the keys session cookies are signed with:
// ENGINE_SESSION_KEYS (comma-separated hex, at least 32 bytes each; the first
// signs, every one verifies, so a rotation keeps the sessions signed with the
// previous key), or else one derived from the engine's secret key.
func sessionKeys(cfg Config) ([][]byte, error) {
	if cfg.SessionKeys == "" {
		secret, err := secretKey(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		return [][]byte{derive(secret, "user-session")}, nil
	}
	var keys [][]byte
	for i, s := range strings.Split(cfg.SessionKeys, ",") {
		k, err := hex.DecodeString(strings.TrimSpace(s))
		if err != nil || len(k) < 32 {
			return nil, fmt.Errorf("ENGINE_SESSION_KEYS: key %d is not at least 32 bytes of hex", i+1)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// loopback reports whether the engine serves only this machine (cookies are
// then not Secure, so the sandbox works over plain http://127.0.0.1).
func loopback(cfg Config) bool {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func newSessions(cfg Config) (*auth.Sessions, error) {
	keys, err := sessionKeys(cfg)
	if err != nil {
		return nil, err
	}
	return auth.NewSessions(!(cfg.Env == "sandbox" && loopback(cfg)), keys...)
}

// mailer adapts engine/mail to the identity routes.
type mailer struct{ s mail.Sender }

func (m mailer) Send(ctx context.Context, to, subject, text string) error {
	return m.s.Send(ctx, mail.Message{To: to, Subject: subject, Text: text})
}

func newMailer(cfg Config, a *App) (identity.Mailer, error) {
	s, err := mail.New(mail.Config{SMTPURL: cfg.SMTPURL, Dir: filepath.Join(cfg.DataDir, "mail"), From: cfg.MailFrom, Now: a.Now})
	if err != nil {
		return nil, err
	}
	return mailer{s}, nil
}
