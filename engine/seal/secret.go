package seal

import (
	"encoding/json"
	"fmt"
	"log/slog"
)

// redacted is all a Secret ever shows of itself.
const redacted = "[sealed]"

// Secret holds a plaintext secret in memory and never shows it: every fmt
// verb, JSON, text and binary marshalling and slog print "[sealed]". Only
// Reveal gives the bytes, to the code that signs with them. It decodes from
// a JSON string (a request's body), so a field of this type can come in but
// never go out. The zero Secret is empty.
type Secret struct{ b []byte }

// NewSecret is a Secret holding a copy of b.
func NewSecret(b []byte) Secret { return Secret{b: append([]byte(nil), b...)} }

// Reveal is the secret's bytes, not a copy: do not keep or change them.
func (s Secret) Reveal() []byte { return s.b }

// Len is the secret's length in bytes.
func (s Secret) Len() int { return len(s.b) }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return len(s.b) == 0 }

// Wipe overwrites the secret's bytes with zeros, in every copy of s.
func (s Secret) Wipe() { clear(s.b) }

func (Secret) String() string                 { return redacted }
func (Secret) GoString() string               { return redacted }
func (Secret) Format(f fmt.State, _ rune)     { _, _ = f.Write([]byte(redacted)) }
func (Secret) MarshalJSON() ([]byte, error)   { return []byte(`"` + redacted + `"`), nil }
func (Secret) MarshalText() ([]byte, error)   { return []byte(redacted), nil }
func (Secret) MarshalBinary() ([]byte, error) { return []byte(redacted), nil }
func (Secret) LogValue() slog.Value           { return slog.StringValue(redacted) }

// UnmarshalJSON takes a JSON string (or null, the empty secret).
func (s *Secret) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = Secret{}
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("seal: a secret is a JSON string")
	}
	*s = Secret{b: []byte(str)}
	return nil
}

// UnmarshalText takes the text whole.
func (s *Secret) UnmarshalText(b []byte) error {
	*s = NewSecret(b)
	return nil
}
