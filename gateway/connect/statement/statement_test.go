package statement_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/svc/engine/gateway/connect/statement"
)

const (
	issuer   = "https://api.example.test"
	audience = "https://sandbox.example.test"
)

var (
	now  = time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	priv = statement.KeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	pub  = priv.Public().(ed25519.PublicKey)
	apps = []statement.App{
		{ID: "app_1", Name: "Desk", OrgID: "org_1", OrgName: "Acme"},
		{ID: "app_2", Name: "Bot", OrgID: "org_1", OrgName: "Acme"},
	}
)

func sign(t testing.TB, at time.Time, life time.Duration) (string, statement.Claims) {
	t.Helper()
	tok, c, err := statement.NewSigner(priv, issuer).Sign("Ada@Example.test", apps, audience, at, life)
	if err != nil {
		t.Fatal(err)
	}
	return tok, c
}

// signRaw signs any payload and header the way an attacker or a buggy
// producer might, with key under alg.
func signRaw(t testing.TB, alg jose.SignatureAlgorithm, key any, typ string, payload any) string {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	opts := &jose.SignerOptions{}
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// payload is a valid statement's payload, as a map a case can bend.
func payload() map[string]any {
	return map[string]any{
		"iss": issuer, "aud": audience, "jti": "0123456789abcdef0123456789abcdef",
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"email": "ada@example.test", "email_verified": true, "apps": apps,
	}
}

func with(kv ...any) map[string]any {
	p := payload()
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(p, kv[i].(string))
			continue
		}
		p[kv[i].(string)] = kv[i+1]
	}
	return p
}

// flipTrailingBit respells s, unpadded base64url of a 64-byte signature, with
// a non-zero unused bit: the same bytes to a lenient decoder.
func flipTrailingBit(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(alphabet[i^1])
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestVerify(t *testing.T) {
	good, _ := sign(t, now, 5*time.Minute)
	parts := strings.Split(good, ".")
	other := statement.KeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize))
	manyApps := make([]statement.App, statement.MaxApps+1)
	for i := range manyApps {
		manyApps[i] = statement.App{ID: fmt.Sprintf("app_%d", i), OrgID: "org_1"}
	}
	tampered := payload()
	tampered["email"] = "eve@example.test"
	tamperedJSON, _ := json.Marshal(tampered)

	cases := []struct {
		name  string
		token string
		at    time.Time
		want  error
	}{
		{name: "signed by another key", token: signRaw(t, jose.EdDSA, other, statement.Type, payload()), want: statement.ErrSignature},
		{name: "another key embedded as jwk header", token: func() string {
			s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: other}, (&jose.SignerOptions{EmbedJWK: true}).WithType(statement.Type))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(payload())
			jws, err := s.Sign(b)
			if err != nil {
				t.Fatal(err)
			}
			tok, _ := jws.CompactSerialize()
			return tok
		}(), want: statement.ErrSignature},
		{name: "wrong audience", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("aud", "https://elsewhere.test")), want: statement.ErrAudience},
		{name: "audience as a list", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("aud", []string{audience})), want: statement.ErrMalformed},
		{name: "wrong issuer", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("iss", "https://evil.test")), want: statement.ErrIssuer},
		{name: "expired at exp", token: good, at: now.Add(5 * time.Minute), want: statement.ErrExpired},
		{name: "expired long ago", token: good, at: now.Add(24 * time.Hour), want: statement.ErrExpired},
		{name: "issued more than a minute ahead", token: good, at: now.Add(-61 * time.Second), want: statement.ErrNotYetValid},
		{name: "alg none", token: b64(`{"alg":"none","typ":"`+statement.Type+`"}`) + "." + parts[1] + ".", want: statement.ErrSignature},
		{name: "HS256 keyed with the public key", token: signRaw(t, jose.HS256, []byte(pub), statement.Type, payload()), want: statement.ErrSignature},
		{name: "oversized", token: good + strings.Repeat("A", statement.MaxTokenSize), want: statement.ErrMalformed},
		{name: "tampered payload", token: parts[0] + "." + base64.RawURLEncoding.EncodeToString(tamperedJSON) + "." + parts[2], want: statement.ErrSignature},
		{name: "tampered signature", token: parts[0] + "." + parts[1] + "." + b64(strings.Repeat("x", 64)), want: statement.ErrSignature},
		{name: "non-canonical base64 of the signature", token: parts[0] + "." + parts[1] + "." + flipTrailingBit(parts[2]), want: statement.ErrMalformed},
		// Go's base64 decoder skips CR and LF, even in Strict mode: the same
		// statement spelled with a line break (found by FuzzVerify).
		{name: "a line break in the payload", token: parts[0] + "." + parts[1][:10] + "\n" + parts[1][10:] + "." + parts[2], want: statement.ErrMalformed},
		{name: "a carriage return in the signature", token: parts[0] + "." + parts[1] + "." + parts[2][:5] + "\r" + parts[2][5:], want: statement.ErrMalformed},
		{name: "JSON serialization", token: `{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`, want: statement.ErrMalformed},
		{name: "empty", token: "", want: statement.ErrMalformed},
		{name: "two parts", token: parts[0] + "." + parts[1], want: statement.ErrMalformed},
		{name: "wrong typ", token: signRaw(t, jose.EdDSA, priv, "JWT", payload()), want: statement.ErrMalformed},
		{name: "no typ", token: signRaw(t, jose.EdDSA, priv, "", payload()), want: statement.ErrMalformed},
		{name: "life above MaxLife", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("exp", now.Add(statement.MaxLife+time.Second).Unix())), want: statement.ErrMalformed},
		{name: "exp before iat", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("exp", now.Add(-time.Second).Unix())), want: statement.ErrMalformed},
		{name: "no exp", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("exp", nil)), want: statement.ErrMalformed},
		{name: "fractional iat", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("iat", float64(now.Unix())+0.5)), want: statement.ErrMalformed},
		{name: "no jti", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("jti", nil)), want: statement.ErrMalformed},
		{name: "unverified email", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("email_verified", false)), want: statement.ErrUnverifiedEmail},
		{name: "no email", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("email", nil)), want: statement.ErrMalformed},
		{name: "email too long", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("email", strings.Repeat("a", 250)+"@b.test")), want: statement.ErrMalformed},
		{name: "no apps", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("apps", nil)), want: statement.ErrMalformed},
		{name: "too many apps", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("apps", manyApps)), want: statement.ErrMalformed},
		{name: "app name too long", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("apps", []statement.App{{ID: "a", OrgID: "o", Name: strings.Repeat("n", 129)}})), want: statement.ErrMalformed},
		{name: "app id too long", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("apps", []statement.App{{ID: strings.Repeat("a", 65), OrgID: "o"}})), want: statement.ErrMalformed},
		{name: "app listed twice", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("apps", []statement.App{{ID: "a", OrgID: "o"}, {ID: "a", OrgID: "o"}})), want: statement.ErrMalformed},
		{name: "claim name in another case", token: signRaw(t, jose.EdDSA, priv, statement.Type, with("email", nil, "EMAIL", "ada@example.test")), want: statement.ErrMalformed},
	}
	v := statement.NewVerifier(pub, issuer, audience)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at := tc.at
			if at.IsZero() {
				at = now
			}
			c, err := v.Verify(tc.token, at)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %+v, %v; want %v", c, err, tc.want)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		apps []statement.App
		at   time.Time
		life time.Duration
	}{
		{name: "two apps", apps: apps, at: now, life: 5 * time.Minute},
		{name: "no apps", apps: nil, at: now, life: statement.MaxLife},
		{name: "sub-second now, shortest life", apps: apps, at: now.Add(999 * time.Millisecond), life: time.Second},
		{name: "sub-second life", apps: apps, at: now.Add(100 * time.Millisecond), life: statement.MaxLife - 300*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, signed, err := statement.NewSigner(priv, issuer).Sign("ada@example.test", tc.apps, audience, tc.at, tc.life)
			if err != nil {
				t.Fatal(err)
			}
			got, err := statement.NewVerifier(pub, issuer, audience).Verify(tok, tc.at)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, signed) {
				t.Fatalf("verified %+v, signed %+v", got, signed)
			}
			if len(got.ID) != 32 {
				t.Errorf("id %q: want 32 hex characters", got.ID)
			}
			if _, err := hex.DecodeString(got.ID); err != nil {
				t.Errorf("id %q: %v", got.ID, err)
			}
			if !got.EmailVerified || got.Email != "ada@example.test" || got.Issuer != issuer || got.Audience != audience {
				t.Errorf("claims %+v", got)
			}
			if life := got.Expires.Sub(got.IssuedAt); life <= 0 || life > statement.MaxLife {
				t.Errorf("life %v", life)
			}
			if tc.apps != nil && !reflect.DeepEqual(got.Apps, tc.apps) {
				t.Errorf("apps %+v, want %+v", got.Apps, tc.apps)
			}
			if _, err := statement.NewVerifier(pub, issuer, audience).Verify(tok, got.Expires); !errors.Is(err, statement.ErrExpired) {
				t.Errorf("at exp: %v, want ErrExpired", err)
			}
		})
	}
	a, _ := sign(t, now, time.Minute)
	b, _ := sign(t, now, time.Minute)
	if a == b {
		t.Error("two statements share a token: ids are not random")
	}
}

func TestSignRefuses(t *testing.T) {
	s := statement.NewSigner(priv, issuer)
	for _, tc := range []struct {
		name  string
		email string
		apps  []statement.App
		life  time.Duration
		want  error
	}{
		{name: "life above MaxLife", email: "a@b.test", life: statement.MaxLife + time.Nanosecond, want: statement.ErrLife},
		{name: "life under a second", email: "a@b.test", life: time.Second - 1, want: statement.ErrLife},
		{name: "negative life", email: "a@b.test", life: -time.Minute, want: statement.ErrLife},
		{name: "no email", email: "", life: time.Minute, want: statement.ErrMalformed},
		{name: "too many apps", email: "a@b.test", apps: make([]statement.App, statement.MaxApps+1), life: time.Minute, want: statement.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, _, err := s.Sign(tc.email, tc.apps, audience, now, tc.life)
			if !errors.Is(err, tc.want) || tok != "" {
				t.Fatalf("Sign = %q, %v; want %v", tok, err, tc.want)
			}
		})
	}
	if _, _, err := statement.NewSigner(priv[:10], issuer).Sign("a@b.test", nil, audience, now, time.Minute); !errors.Is(err, statement.ErrKey) {
		t.Errorf("short key: %v, want ErrKey", err)
	}
}

func TestVerifierWithBadKeyRefusesWithoutPanic(t *testing.T) {
	good, _ := sign(t, now, time.Minute)
	for _, k := range []ed25519.PublicKey{nil, pub[:31], make(ed25519.PublicKey, 32)} {
		if _, err := statement.NewVerifier(k, issuer, audience).Verify(good, now); !errors.Is(err, statement.ErrKey) {
			t.Errorf("key %x: %v, want ErrKey", []byte(k), err)
		}
	}
}

func TestParsePublicKey(t *testing.T) {
	x := base64.RawURLEncoding.EncodeToString(pub)
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{name: "PublicKeyText", in: statement.PublicKeyText(pub), ok: true},
		{name: "hex", in: hex.EncodeToString(pub), ok: true},
		{name: "hex with newline", in: hex.EncodeToString(pub) + "\n", ok: true},
		{name: "JWK", in: `{"kty":"OKP","crv":"Ed25519","x":"` + x + `"}`, ok: true},
		{name: "JWK with kid and use", in: `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","kid":"k1","use":"sig"}`, ok: true},
		{name: "JWK with private part", in: `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","d":"` + base64.RawURLEncoding.EncodeToString(priv.Seed()) + `"}`},
		{name: "JWK of another curve", in: `{"kty":"OKP","crv":"X25519","x":"` + x + `"}`},
		{name: "JWK symmetric", in: `{"kty":"oct","k":"` + x + `"}`},
		{name: "padded base64url", in: base64.URLEncoding.EncodeToString(pub)},
		{name: "standard base64 with + or /", in: strings.NewReplacer("-", "+", "_", "/").Replace(x) + "+"},
		{name: "short", in: x[:40]},
		{name: "a line break in base64url", in: x[:20] + "\n" + x[21:]},
		{name: "low-order point", in: hex.EncodeToString(make([]byte, 32))},
		{name: "empty", in: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statement.ParsePublicKey(tc.in)
			if !tc.ok {
				if err == nil || !errors.Is(err, statement.ErrKey) {
					t.Fatalf("ParsePublicKey = %x, %v; want ErrKey", []byte(got), err)
				}
				return
			}
			if err != nil || !got.Equal(pub) {
				t.Fatalf("ParsePublicKey = %x, %v; want %x", []byte(got), err, []byte(pub))
			}
		})
	}
}

func TestSeedFromSecret(t *testing.T) {
	secret := []byte("a secret of at least thirty-two bytes, from the vault")
	a, err := statement.SeedFromSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := statement.SeedFromSecret(secret)
	if len(a) != ed25519.SeedSize || !bytes.Equal(a, b) {
		t.Fatalf("seed %x, again %x", a, b)
	}
	if !statement.KeyFromSeed(a).Equal(statement.KeyFromSeed(b)) {
		t.Error("same seed, different keys")
	}
	if _, err := statement.SeedFromSecret(secret[:31]); !errors.Is(err, statement.ErrKey) {
		t.Errorf("short secret: %v, want ErrKey", err)
	}
}

func FuzzVerify(f *testing.F) {
	// Fixed claims and deterministic Ed25519 give every fuzz worker the same
	// token; Sign's random id would not.
	good := signRaw(f, jose.EdDSA, priv, statement.Type, payload())
	if _, err := statement.NewVerifier(pub, issuer, audience).Verify(good, now); err != nil {
		f.Fatal(err)
	}
	parts := strings.Split(good, ".")
	f.Add(good)
	f.Add("")
	f.Add("..")
	f.Add("a.b.c")
	f.Add(parts[0] + "." + parts[1] + ".")
	f.Add(b64(`{"alg":"none"}`) + "." + parts[1] + ".")
	f.Add(b64(`{"alg":"EdDSA","crit":["b64"],"b64":false}`) + "." + parts[1] + "." + parts[2])
	f.Add(`{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`)
	f.Add("\x00\xff.\xfe.")
	v := statement.NewVerifier(pub, issuer, audience)
	f.Fuzz(func(t *testing.T, token string) {
		c, err := v.Verify(token, now)
		if err != nil {
			return
		}
		if token != good {
			// Only the one statement we signed may verify; anything else
			// verifying is a forgery (or a malleable encoding of it).
			t.Fatalf("verified a token we did not sign: %q → %+v", token, c)
		}
	})
}
