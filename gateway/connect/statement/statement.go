// Package statement issues and checks Connect account statements: a short
// token production signs for a signed-in Connect account, naming its verified
// email and the apps it owns, which the sandbox exchanges for a sandbox
// session.
//
// A statement is a compact JWS, alg EdDSA (Ed25519), typ [Type], whose payload
// is a JSON object with the registered claims iss, aud (one string), jti, iat
// and exp (whole seconds) and the private claims email, email_verified and
// apps. Production holds the private key; the sandbox holds only the public
// key, so no credential is shared between the environments.
//
// A statement is single use: [Verifier.Verify] reports its id and expiry, and
// the caller records the id until the expiry to refuse a replay. This package
// keeps no state.
package statement

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	jose "github.com/go-jose/go-jose/v4"
	josejson "github.com/go-jose/go-jose/v4/json"
)

// Type is the JWS typ header of a statement; a token of any other type is
// refused, so no other token signed with the same key passes as a statement.
const Type = "connect-statement+jwt"

// Limits on a statement. Sign refuses what Verify would refuse.
const (
	MaxLife      = 10 * time.Minute // exp - iat is at most this
	MaxTokenSize = 64 << 10         // bytes of the compact serialization
	MaxApps      = 100
	MaxEmailLen  = 254 // bytes
	MaxNameLen   = 128 // runes, for app and organization names
	MaxIDLen     = 64  // bytes, for app, organization and statement ids
	MaxPartyLen  = 256 // bytes, for iss and aud

	// Skew is how far ahead of the verifier's clock iat may be.
	Skew = time.Minute
)

// Errors Verify and Sign wrap; test them with errors.Is.
var (
	ErrMalformed       = errors.New("statement: malformed")
	ErrSignature       = errors.New("statement: bad signature")
	ErrIssuer          = errors.New("statement: wrong issuer")
	ErrAudience        = errors.New("statement: wrong audience")
	ErrExpired         = errors.New("statement: expired")
	ErrNotYetValid     = errors.New("statement: not yet valid")
	ErrUnverifiedEmail = errors.New("statement: email not verified")
	ErrLife            = errors.New("statement: life out of range")
	ErrKey             = errors.New("statement: invalid key")
)

// App is one app a Connect account owns, with the organization owning it.
type App struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	OrgID   string `json:"orgId"`
	OrgName string `json:"orgName"`
}

// Claims is what a statement says. Times are whole seconds, in UTC.
type Claims struct {
	Issuer        string
	Audience      string
	ID            string // jti: the single-use id to record until Expires
	Email         string
	EmailVerified bool
	Apps          []App // never nil
	IssuedAt      time.Time
	Expires       time.Time
}

// wire is the JWS payload.
type wire struct {
	Issuer        string `json:"iss"`
	Audience      string `json:"aud"`
	ID            string `json:"jti"`
	IssuedAt      int64  `json:"iat"`
	Expires       int64  `json:"exp"`
	Email         string `json:"email"`
	EmailVerified bool   `json:"email_verified"`
	Apps          []App  `json:"apps"`
}

var algs = []jose.SignatureAlgorithm{jose.EdDSA}

// Signer issues statements. It is safe for concurrent use.
type Signer struct {
	issuer string
	signer jose.Signer
	err    error // a bad key, reported by every Sign
}

// NewSigner returns a Signer signing with priv as issuer. A key of the wrong
// size or an empty issuer makes every Sign fail with ErrKey.
func NewSigner(priv ed25519.PrivateKey, issuer string) *Signer {
	s := &Signer{issuer: issuer}
	if len(priv) != ed25519.PrivateKeySize || issuer == "" {
		s.err = fmt.Errorf("%w: need a %d-byte Ed25519 private key and an issuer", ErrKey, ed25519.PrivateKeySize)
		return s
	}
	if err := checkPublicKey(priv.Public().(ed25519.PublicKey)); err != nil {
		s.err = err
		return s
	}
	opts := (&jose.SignerOptions{}).WithType(Type)
	s.signer, s.err = jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv}, opts)
	if s.err != nil {
		s.err = fmt.Errorf("%w: %v", ErrKey, s.err)
	}
	return s
}

// Sign issues a statement that the account with the verified email owns apps,
// for audience, issued at now and expiring life later (at least a second, at
// most MaxLife). The caller must have verified email. It returns the token and
// the claims Verify will report for it. The id is 128 random bits in hex.
func (s *Signer) Sign(email string, apps []App, audience string, now time.Time, life time.Duration) (token string, c Claims, err error) {
	if s.err != nil {
		return "", Claims{}, s.err
	}
	if life < time.Second || life > MaxLife {
		return "", Claims{}, fmt.Errorf("%w: %v not within [1s, %v]", ErrLife, life, MaxLife)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", Claims{}, fmt.Errorf("statement id: %w", err)
	}
	w := wire{
		Issuer:        s.issuer,
		Audience:      audience,
		ID:            hex.EncodeToString(id[:]),
		IssuedAt:      now.Unix(),
		Expires:       now.Add(life).Unix(),
		Email:         email,
		EmailVerified: true,
		Apps:          append([]App{}, apps...),
	}
	if err := w.check(); err != nil {
		return "", Claims{}, err
	}
	payload, err := josejson.Marshal(w)
	if err != nil {
		return "", Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	jws, err := s.signer.Sign(payload)
	if err != nil {
		return "", Claims{}, fmt.Errorf("sign statement: %w", err)
	}
	token, err = jws.CompactSerialize()
	if err != nil {
		return "", Claims{}, fmt.Errorf("sign statement: %w", err)
	}
	if len(token) > MaxTokenSize {
		return "", Claims{}, fmt.Errorf("%w: token of %d bytes exceeds %d", ErrMalformed, len(token), MaxTokenSize)
	}
	return token, w.claims(), nil
}

// Verifier checks statements. It is safe for concurrent use.
type Verifier struct {
	pub      ed25519.PublicKey
	issuer   string
	audience string
	err      error // a bad key, reported by every Verify
}

// NewVerifier returns a Verifier accepting statements signed by pub's private
// key, from issuer, for audience. An invalid key (wrong size, low order) makes
// every Verify fail with ErrKey.
func NewVerifier(pub ed25519.PublicKey, issuer, audience string) *Verifier {
	v := &Verifier{pub: append(ed25519.PublicKey(nil), pub...), issuer: issuer, audience: audience}
	v.err = checkPublicKey(pub)
	return v
}

// Verify checks token at now and returns its claims. It accepts only a compact
// JWS of at most MaxTokenSize bytes, alg EdDSA, typ Type, signed by the
// Verifier's key, from its issuer, for its audience, with iat at most Skew
// ahead of now, now before exp, exp - iat within (0, MaxLife], a verified
// email and well-formed apps. The error wraps one of the package's sentinels.
// Verify does not remember ids: the caller refuses a replayed Claims.ID.
func (v *Verifier) Verify(token string, now time.Time) (Claims, error) {
	if v.err != nil {
		return Claims{}, v.err
	}
	if len(token) > MaxTokenSize {
		return Claims{}, fmt.Errorf("%w: token of %d bytes exceeds %d", ErrMalformed, len(token), MaxTokenSize)
	}
	// go-jose decodes base64url leniently (non-zero trailing bits pass, and
	// Go's decoder skips CR and LF even in Strict mode), so one statement
	// would have many spellings; take only the canonical one: the base64url
	// alphabet and the two dots, and no trailing bits.
	if i := strings.IndexFunc(token, func(r rune) bool { return !base64URL(r) && r != '.' }); i >= 0 {
		return Claims{}, fmt.Errorf("%w: byte %d is not base64url", ErrMalformed, i)
	}
	for part := range strings.SplitSeq(token, ".") {
		if _, err := base64.RawURLEncoding.Strict().DecodeString(part); err != nil {
			return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
	}
	// ParseSignedCompact, not ParseSigned: the latter also takes the JSON
	// serialization and strips whitespace.
	jws, err := jose.ParseSignedCompact(token, algs)
	if err != nil {
		if _, ok := errors.AsType[*jose.ErrUnexpectedSignatureAlgorithm](err); ok {
			return Claims{}, fmt.Errorf("%w: %v", ErrSignature, err)
		}
		return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(jws.Signatures) != 1 {
		return Claims{}, fmt.Errorf("%w: %d signatures", ErrMalformed, len(jws.Signatures))
	}
	payload, err := jws.Verify(v.pub)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	// Signed by our key from here on; still checked, never trusted blindly.
	if typ, _ := jws.Signatures[0].Protected.ExtraHeaders[jose.HeaderType].(string); typ != Type {
		return Claims{}, fmt.Errorf("%w: typ %q", ErrMalformed, typ)
	}
	var w wire
	// go-jose's json matches names case-sensitively and refuses duplicate keys.
	if err := josejson.Unmarshal(payload, &w); err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := w.check(); err != nil {
		return Claims{}, err
	}
	if w.Issuer != v.issuer {
		return Claims{}, fmt.Errorf("%w: %q", ErrIssuer, w.Issuer)
	}
	if w.Audience != v.audience {
		return Claims{}, fmt.Errorf("%w: %q", ErrAudience, w.Audience)
	}
	c := w.claims()
	if c.IssuedAt.After(now.Add(Skew)) {
		return Claims{}, fmt.Errorf("%w: issued at %v", ErrNotYetValid, c.IssuedAt)
	}
	if !now.Before(c.Expires) {
		return Claims{}, fmt.Errorf("%w: at %v", ErrExpired, c.Expires)
	}
	if !c.EmailVerified {
		return Claims{}, ErrUnverifiedEmail
	}
	return c, nil
}

// check reports the first shape problem of w, as ErrMalformed.
func (w *wire) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
	switch {
	case !idOK(w.ID):
		return bad("jti %q", w.ID)
	case w.Issuer == "" || len(w.Issuer) > MaxPartyLen:
		return bad("iss of %d bytes", len(w.Issuer))
	case w.Audience == "" || len(w.Audience) > MaxPartyLen:
		return bad("aud of %d bytes", len(w.Audience))
	case w.IssuedAt <= 0 || w.Expires <= w.IssuedAt:
		return bad("iat %d, exp %d", w.IssuedAt, w.Expires)
	case w.Expires-w.IssuedAt > int64(MaxLife/time.Second):
		return bad("life of %ds exceeds %v", w.Expires-w.IssuedAt, MaxLife)
	case !emailOK(w.Email):
		return bad("email %q", w.Email)
	case w.Apps == nil:
		return bad("apps missing")
	case len(w.Apps) > MaxApps:
		return bad("%d apps exceed %d", len(w.Apps), MaxApps)
	}
	seen := make(map[string]bool, len(w.Apps))
	for i, a := range w.Apps {
		switch {
		case !idOK(a.ID) || !idOK(a.OrgID):
			return bad("app %d: id %q, orgId %q", i, a.ID, a.OrgID)
		case !nameOK(a.Name) || !nameOK(a.OrgName):
			return bad("app %d: name or orgName too long or not text", i)
		case seen[a.ID]:
			return bad("app %q listed twice", a.ID)
		}
		seen[a.ID] = true
	}
	return nil
}

func (w *wire) claims() Claims {
	return Claims{
		Issuer:        w.Issuer,
		Audience:      w.Audience,
		ID:            w.ID,
		Email:         w.Email,
		EmailVerified: w.EmailVerified,
		Apps:          w.Apps,
		IssuedAt:      time.Unix(w.IssuedAt, 0).UTC(),
		Expires:       time.Unix(w.Expires, 0).UTC(),
	}
}

// idOK: 1 to MaxIDLen printable ASCII bytes, no space.
func idOK(s string) bool {
	if s == "" || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// emailOK: at most MaxEmailLen bytes, local@domain, no space or control.
func emailOK(s string) bool {
	at := strings.LastIndexByte(s, '@')
	if len(s) > MaxEmailLen || at <= 0 || at == len(s)-1 || !utf8.ValidString(s) {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) < 0
}

// nameOK: at most MaxNameLen runes of valid UTF-8, no control characters.
func nameOK(s string) bool {
	return len(s) <= 4*MaxNameLen && utf8.ValidString(s) && utf8.RuneCountInString(s) <= MaxNameLen &&
		strings.IndexFunc(s, unicode.IsControl) < 0
}

// base64URL reports whether r is in the unpadded base64url alphabet.
func base64URL(r rune) bool {
	return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}

// ParsePublicKey parses an Ed25519 public key given as a JWK
// ({"kty":"OKP","crv":"Ed25519","x":...}, public members only), as the 32 raw
// bytes in unpadded base64url (43 characters, what PublicKeyText writes) or in
// hex (64 characters). Surrounding space is ignored. Low-order keys are
// refused.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	var raw []byte
	var err error
	switch {
	case strings.HasPrefix(s, "{"):
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON([]byte(s)); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrKey, err)
		}
		pub, ok := k.Key.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%w: JWK is a %T, want an Ed25519 public key", ErrKey, k.Key)
		}
		raw = pub
	case len(s) == hex.EncodedLen(ed25519.PublicKeySize):
		raw, err = hex.DecodeString(s)
	case len(s) == base64.RawURLEncoding.EncodedLen(ed25519.PublicKeySize):
		if strings.IndexFunc(s, func(r rune) bool { return !base64URL(r) }) >= 0 {
			return nil, fmt.Errorf("%w: not base64url", ErrKey)
		}
		raw, err = base64.RawURLEncoding.Strict().DecodeString(s)
	default:
		return nil, fmt.Errorf("%w: want a JWK, 43 base64url or 64 hex characters, got %d characters", ErrKey, len(s))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	pub := ed25519.PublicKey(raw)
	if err := checkPublicKey(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

// PublicKeyText returns pub in unpadded base64url, a form ParsePublicKey takes.
func PublicKeyText(pub ed25519.PublicKey) string {
	return base64.RawURLEncoding.EncodeToString(pub)
}

// checkPublicKey refuses a key of the wrong size (ed25519.Verify panics on
// one, and go-jose checks only for an empty key) or a low-order point.
func checkPublicKey(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: Ed25519 public key of %d bytes, want %d", ErrKey, len(pub), ed25519.PublicKeySize)
	}
	// go-jose refuses low-order keys when it encodes a JWK.
	b, err := jose.JSONWebKey{Key: pub}.MarshalJSON()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrKey, err)
	}
	var back jose.JSONWebKey
	if err := back.UnmarshalJSON(b); err != nil {
		return fmt.Errorf("%w: %v", ErrKey, err)
	}
	if k, ok := back.Key.(ed25519.PublicKey); !ok || !bytes.Equal(k, pub) {
		return fmt.Errorf("%w: key does not round-trip", ErrKey)
	}
	return nil
}

// KeyFromSeed returns the Ed25519 private key of a 32-byte seed (RFC 8032),
// as ed25519.NewKeyFromSeed, which panics on any other length. To keep the
// key as a longer secret, derive the seed with SeedFromSecret.
func KeyFromSeed(seed []byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(seed)
}

// seedInfo binds SeedFromSecret's output to this use; never change it, or
// every derived key changes.
const seedInfo = "svc/engine connect statement ed25519 seed v1"

// SeedFromSecret derives a 32-byte Ed25519 seed from secret with HKDF-SHA256
// (no salt, info seedInfo). The secret must carry at least 32 bytes of
// entropy; one shorter than 32 bytes is refused with ErrKey.
func SeedFromSecret(secret []byte) ([]byte, error) {
	if len(secret) < ed25519.SeedSize {
		return nil, fmt.Errorf("%w: secret of %d bytes, want at least %d", ErrKey, len(secret), ed25519.SeedSize)
	}
	return hkdf.Key(sha256.New, secret, nil, seedInfo, ed25519.SeedSize)
}
