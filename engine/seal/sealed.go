package seal

import (
	"encoding/hex"
	"errors"
	"fmt"
)

// sealedFormat is the version of Sealed's binary form.
const sealedFormat byte = 1

// MaxPlaintext bounds what one Sealed holds: an API key and secret, or a
// private key in PEM, fit many times over.
const MaxPlaintext = 64 << 10

const (
	nonceLen  = 12
	tagLen    = 16
	headerLen = 1 + dataKeyIDLen + nonceLen
	// MaxSealedLen bounds the binary form of a Sealed.
	MaxSealedLen = headerLen + MaxPlaintext + tagLen
)

// ErrMalformed means bytes are not a Sealed's binary form.
var ErrMalformed = errors.New("seal: not a sealed secret")

// Sealed is a secret sealed under its link's data key: which data key (its
// random id; a link's data key made again after a Destroy has another), the
// nonce, and the ciphertext with its tag. It holds no key and no plaintext,
// and is safe to store and to log, though there is no reason to. Events carry
// it as the []byte of MarshalBinary.
type Sealed struct {
	DataKey    DataKeyID
	Nonce      [nonceLen]byte
	Ciphertext []byte
}

// DataKeyID names one data key of a link.
type DataKeyID [dataKeyIDLen]byte

const dataKeyIDLen = 16

func (d DataKeyID) String() string { return hex.EncodeToString(d[:]) }

// IsZero reports whether s is the zero Sealed (no secret).
func (s Sealed) IsZero() bool { return s.Ciphertext == nil && s.DataKey == DataKeyID{} }

// MarshalBinary is s's binary form: a format byte (1), the data key id, the
// nonce, the ciphertext.
func (s Sealed) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, headerLen+len(s.Ciphertext)))
}

// AppendBinary appends s's binary form to b.
func (s Sealed) AppendBinary(b []byte) ([]byte, error) {
	if len(s.Ciphertext) < tagLen || len(s.Ciphertext) > MaxPlaintext+tagLen {
		return b, fmt.Errorf("%w: ciphertext of %d bytes", ErrMalformed, len(s.Ciphertext))
	}
	b = append(b, sealedFormat)
	b = append(b, s.DataKey[:]...)
	b = append(b, s.Nonce[:]...)
	return append(b, s.Ciphertext...), nil
}

// UnmarshalBinary reads the binary form of MarshalBinary; s keeps a copy of
// nothing from b but what it decodes.
func (s *Sealed) UnmarshalBinary(b []byte) error {
	switch {
	case len(b) == 0:
		return fmt.Errorf("%w: empty", ErrMalformed)
	case b[0] != sealedFormat:
		return fmt.Errorf("%w: format %d, want %d", ErrMalformed, b[0], sealedFormat)
	case len(b) < headerLen+tagLen:
		return fmt.Errorf("%w: %d bytes, too short", ErrMalformed, len(b))
	case len(b) > MaxSealedLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrMalformed, len(b), MaxSealedLen)
	}
	var out Sealed
	copy(out.DataKey[:], b[1:])
	copy(out.Nonce[:], b[1+dataKeyIDLen:])
	out.Ciphertext = append([]byte(nil), b[headerLen:]...)
	*s = out
	return nil
}

// Parse is UnmarshalBinary into a new Sealed.
func Parse(b []byte) (Sealed, error) {
	var s Sealed
	err := s.UnmarshalBinary(b)
	return s, err
}

// sealAD is the associated data of a secret sealed for linkID under the data
// key dk: a sealed secret opens only for its own link, under its own key.
func sealAD(linkID string, dk DataKeyID) []byte {
	ad := make([]byte, 0, 16+dataKeyIDLen+len(linkID))
	ad = append(ad, "seal.secret/v1\x00"...)
	ad = append(ad, dk[:]...)
	return append(ad, linkID...)
}
