package identity

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/svc/engine/gateway/auth"
	"golang.org/x/crypto/argon2"
)

// Argon2 are the argon2id parameters of new password digests (OWASP's
// second recommended set: 19 MiB, 2 passes, 1 lane), with a 16-byte random
// salt per digest and a 32-byte output. A digest states its own parameters,
// so raising them later leaves old digests verifiable.
var Argon2 = Params{MemoryKiB: 19 * 1024, Time: 2, Threads: 1}

// Params are argon2id cost parameters.
type Params struct {
	MemoryKiB uint32
	Time      uint32
	Threads   uint8
}

var raw = base64.RawStdEncoding

// HashPassword is the PHC string of password's argon2id digest under p.
func HashPassword(p Params, password string) string {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		panic(err)
	}
	sum := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, 32)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.MemoryKiB, p.Time, p.Threads,
		raw.EncodeToString(salt), raw.EncodeToString(sum))
}

// maxCost bounds the parameters a stored digest may ask for, so a digest
// written by hand cannot make one check take the machine.
const maxMemoryKiB, maxTime = 256 * 1024, 10

// CheckPassword reports whether password matches the PHC digest, in time
// that does not depend on where they differ.
func CheckPassword(digest, password string) bool {
	parts := strings.Split(digest, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return false
	}
	var p Params
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Time, &p.Threads); err != nil ||
		p.MemoryKiB == 0 || p.MemoryKiB > maxMemoryKiB || p.Time == 0 || p.Time > maxTime || p.Threads == 0 {
		return false
	}
	salt, err1 := raw.DecodeString(parts[4])
	want, err2 := raw.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 || len(want) > 64 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// dummyDigest is checked against when an email has no user, so a wrong
// email costs what a wrong password does.
var dummyDigest = HashPassword(Argon2, "no user has this password")

// newToken is a single-use token for the user: "<userId>.<48 hex of 24
// random bytes>" (auth.NewKey). Only its digest (auth.Digest) is recorded.
func newToken(userID string) string { return auth.NewKey(userID + ".") }

// tokenUser is the user a token names, or false for a malformed token.
func tokenUser(token string) (string, bool) {
	uid, secret, ok := strings.Cut(token, ".")
	if !ok || len(token) > 128 || !strings.HasPrefix(uid, "usr_") || len(uid) != 28 || len(secret) != 48 {
		return "", false
	}
	if _, err := hex.DecodeString(uid[4:] + secret); err != nil {
		return "", false
	}
	return uid, true
}
