// Package webhook is the firm's webhook delivery reactor. It is fed by the
// commit log: every commit that yields a webhook event is delivered to each of
// the firm's endpoints registered before it (in log order) whose filter admits
// the type. Each attempt is recorded as an event in the endpoint's delivery
// ledger, so the retry schedule survives restarts and a delivery that
// succeeded is never sent again.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// SignatureHeader is the header each delivery carries.
const SignatureHeader = "svc-signature"

// Secret is the signing secret of endpoint id of a firm, derived from the
// engine's key: nothing secret is stored in the log or a read model.
func Secret(key []byte, tenantID, webhookID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("webhook-secret\x00" + tenantID + "\x00" + webhookID))
	return "whsec_" + hex.EncodeToString(m.Sum(nil))
}

// Sign is the svc-signature header value of body at time t:
// t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">, Stripe's scheme.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}
