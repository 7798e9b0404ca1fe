package operator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// CookieName is the operator session cookie's name.
const CookieName = "svc_session"

// Scopes an operator session can carry.
const (
	ScopeAccountRead  = "account:read"
	ScopeAccountWrite = "account:write"
)

// Session is what a signed operator session states.
type Session struct {
	Subject string   `json:"sub"`
	VenueID string   `json:"venueId"`
	Scopes  []string `json:"scopes"`
	Expires int64    `json:"exp"` // unix seconds
}

// Has reports whether the session carries scope.
func (s Session) Has(scope string) bool {
	for _, sc := range s.Scopes {
		if sc == scope {
			return true
		}
	}
	return false
}

var b64 = base64.RawURLEncoding

func mac(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("operator-session.v1\x00" + payload))
	return m.Sum(nil)
}

// Sign renders s as a cookie value: v1.<payload>.<HMAC-SHA256 of the payload>.
func Sign(key []byte, s Session) string {
	b, _ := json.Marshal(s)
	p := b64.EncodeToString(b)
	return "v1." + p + "." + b64.EncodeToString(mac(key, p))
}

// Verify checks a cookie value's signature and expiry.
func Verify(key []byte, value string, now time.Time) (Session, bool) {
	parts := strings.Split(value, ".")
	if len(parts) != 3 || parts[0] != "v1" || len(value) > 4096 {
		return Session{}, false
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, mac(key, parts[1])) {
		return Session{}, false
	}
	b, err := b64.DecodeString(parts[1])
	if err != nil {
		return Session{}, false
	}
	var s Session
	if json.Unmarshal(b, &s) != nil || now.Unix() >= s.Expires {
		return Session{}, false
	}
	return s, true
}
