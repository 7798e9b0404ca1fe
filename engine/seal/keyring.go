// Package seal keeps provider secrets sealed at rest by envelope
// encryption. Each link has its own random data key (AES-256-GCM); a secret
// is sealed under its link's data key, bound to the link id, and the sealed
// bytes (Sealed) may travel anywhere, the append-only log included. The data
// key is kept only wrapped under a key-encryption key (KEK) of the Keyring,
// in a JetStream key-value bucket (Vault) from which it can be destroyed:
// destroying a link's data key leaves every sealed copy of its secrets
// unreadable for good (crypto-shredding). Several KEKs may be configured;
// the first wraps new data keys and Vault.Rotate re-wraps stored ones under
// it, so an old KEK can then be removed. See docs/secrets.md.
//
// Nothing in this package logs, and no error it returns holds key material
// or plaintext.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// KeyLen is the length of a key-encryption key and of a data key: AES-256.
const KeyLen = 32

// MaxKeys bounds how many KEKs a setting may hold; maxSetting its length.
const (
	MaxKeys    = 16
	maxSetting = 4096
	maxIDLen   = 32
)

// Keyring is the key-encryption keys of a key setting, in its order: the
// first is the current one, which wraps new data keys and which Rotate
// re-wraps under. A Keyring never prints its keys: every fmt verb shows its
// ids only. It is safe for concurrent use.
type Keyring struct {
	ids  []string
	keks map[string]cipher.AEAD
}

// ParseKeys parses a key setting: comma-separated entries id:key, the key
// 32 bytes in standard base64 (what `openssl rand -base64 32` prints), the
// first entry the current KEK. An id is 1 to 32 of A-Z a-z 0-9 _ -, and
// unique. Spaces around entries are ignored. Errors name an entry by its
// position (and by its id once the id is valid), never by its key.
func ParseKeys(setting string) (*Keyring, error) {
	if len(setting) > maxSetting {
		return nil, fmt.Errorf("seal: key setting: longer than %d characters", maxSetting)
	}
	setting = strings.TrimSpace(setting)
	if setting == "" {
		return nil, errors.New("seal: key setting: empty; want id:base64-key[,id:base64-key...] (generate a key with `openssl rand -base64 32`)")
	}
	entries := strings.Split(setting, ",")
	if len(entries) > MaxKeys {
		return nil, fmt.Errorf("seal: key setting: %d entries, at most %d", len(entries), MaxKeys)
	}
	k := &Keyring{keks: make(map[string]cipher.AEAD, len(entries))}
	for i, e := range entries {
		n := i + 1
		id, b64, ok := strings.Cut(strings.TrimSpace(e), ":")
		if !ok {
			return nil, fmt.Errorf("seal: key setting: entry %d is not id:base64-key", n)
		}
		id, b64 = strings.TrimSpace(id), strings.TrimSpace(b64)
		if !validID(id) {
			return nil, fmt.Errorf("seal: key setting: entry %d: the id must be 1 to %d of A-Z a-z 0-9 _ -", n, maxIDLen)
		}
		if _, dup := k.keks[id]; dup {
			return nil, fmt.Errorf("seal: key setting: entry %d: id %q appears twice", n, id)
		}
		// Decode into a buffer of its own, so that an error cannot hold the key.
		if base64.StdEncoding.DecodedLen(len(b64)) > 2*KeyLen {
			return nil, fmt.Errorf("seal: key setting: key %q: not %d bytes", id, KeyLen)
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("seal: key setting: key %q: not standard base64", id)
		}
		if len(raw) != KeyLen {
			return nil, fmt.Errorf("seal: key setting: key %q: %d bytes, want %d", id, len(raw), KeyLen)
		}
		aead, err := newGCM(raw)
		clear(raw)
		if err != nil {
			return nil, fmt.Errorf("seal: key setting: key %q: %w", id, err)
		}
		k.ids = append(k.ids, id)
		k.keks[id] = aead
	}
	return k, nil
}

// NewKeySetting answers a setting entry id:key with a fresh random key, for
// ParseKeys: prepend it to the setting to make it the current KEK.
func NewKeySetting(id string) (string, error) {
	if !validID(id) {
		return "", fmt.Errorf("seal: key id must be 1 to %d of A-Z a-z 0-9 _ -", maxIDLen)
	}
	raw := make([]byte, KeyLen)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("seal: new key: %w", err)
	}
	s := id + ":" + base64.StdEncoding.EncodeToString(raw)
	clear(raw)
	return s, nil
}

// Current is the id of the KEK that wraps new data keys.
func (k *Keyring) Current() string { return k.ids[0] }

// IDs are the ids of the keyring's KEKs, the current one first.
func (k *Keyring) IDs() []string { return append([]string(nil), k.ids...) }

// String shows the keyring's ids, never its keys.
func (k Keyring) String() string {
	return "seal.Keyring[" + strings.Join(k.ids, ",") + "]"
}

// GoString is String: %#v shows no key either.
func (k Keyring) GoString() string { return k.String() }

// Format is String for every verb.
func (k Keyring) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(k.String())) }

// kek is the KEK of id.
func (k *Keyring) kek(id string) (cipher.AEAD, error) {
	if a, ok := k.keks[id]; ok {
		return a, nil
	}
	return nil, &UnknownKEKError{KEK: id, Have: k.IDs()}
}

// ErrUnknownKEK means a data key is wrapped under a KEK the keyring does not
// hold; the error is an *UnknownKEKError naming it.
var ErrUnknownKEK = errors.New("seal: KEK not in the key setting")

// UnknownKEKError names the KEK a data key is wrapped under that the keyring
// lacks (by id: a KEK id is not secret), and the ids it holds.
type UnknownKEKError struct {
	KEK  string
	Have []string
}

func (e *UnknownKEKError) Error() string {
	return fmt.Sprintf("seal: a data key is wrapped under KEK %q, which the key setting does not hold (it holds %s); put %q back in the setting, and run a rotation before removing a KEK",
		e.KEK, strings.Join(e.Have, ", "), e.KEK)
}

// Is makes errors.Is(err, ErrUnknownKEK) hold.
func (e *UnknownKEKError) Is(target error) bool { return target == ErrUnknownKEK }

func validID(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// newGCM is AES-256-GCM under key, with the standard 12-byte nonce.
func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != KeyLen {
		return nil, fmt.Errorf("seal: key of %d bytes, want %d", len(key), KeyLen)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}
