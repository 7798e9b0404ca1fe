package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// Sealer signs small JSON records into tokens a client carries and hands
// back: "<version>.<payload>.<HMAC-SHA256>", the payload base64url JSON. The
// first key signs; every key opens, so a rotated-out key keeps its tokens
// until they end. The label separates the kinds of token one key signs.
type Sealer struct {
	version, label string
	max            int
	keys           [][]byte
}

// NewSealer makes a sealer of tokens of at most max bytes over keys (at least
// one, each at least 32 bytes).
func NewSealer(version, label string, max int, keys ...[]byte) (*Sealer, error) {
	if len(keys) == 0 {
		return nil, errors.New(label + ": a signing key is required")
	}
	for _, k := range keys {
		if len(k) < 32 {
			return nil, errors.New(label + ": a signing key has at least 32 bytes")
		}
	}
	return &Sealer{version: version, label: label, max: max, keys: keys}, nil
}

var b64 = base64.RawURLEncoding

func (s *Sealer) mac(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s.label + "\x00" + payload))
	return m.Sum(nil)
}

// Seal signs v.
func (s *Sealer) Seal(v any) string {
	b, _ := json.Marshal(v)
	p := b64.EncodeToString(b)
	return s.version + "." + p + "." + b64.EncodeToString(s.mac(s.keys[0], p))
}

// Open reads a token's record into v when its signature holds under any key.
func (s *Sealer) Open(token string, v any) bool {
	if len(token) > s.max {
		return false
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != s.version {
		return false
	}
	// The signature as Seal spells it, compared as text: Go's base64 decoder
	// would also take it with a line break inside or other trailing bits, and
	// one record would have many tokens.
	ok := false
	for _, k := range s.keys {
		ok = ok || hmac.Equal([]byte(parts[2]), []byte(b64.EncodeToString(s.mac(k, parts[1]))))
	}
	if !ok {
		return false
	}
	b, err := b64.DecodeString(parts[1])
	return err == nil && json.Unmarshal(b, v) == nil
}
