package auth

import (
	"bytes"
	"strings"
	"testing"
)

// A sealed record opens from its token and from no other spelling of it: a
// line break or a carriage return inside, which Go's base64 decoder skips, or
// other trailing bits in the signature's last character.
func TestSealerOpensOnlyTheTokenItSealed(t *testing.T) {
	s, err := NewSealer("t1", "test", 1024, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	type rec struct{ A string }
	tok := s.Seal(rec{A: "x"})
	var got rec
	if !s.Open(tok, &got) || got.A != "x" {
		t.Fatalf("Open(%q) = %+v, want the sealed record", tok, got)
	}
	parts := strings.Split(tok, ".")
	// A 32-byte MAC is 43 characters, the last holding 4 bits and 2 unused
	// (zero in Seal's spelling): the next character of the alphabet differs
	// only in an unused bit and decodes to the same MAC.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	other := alphabet[strings.IndexByte(alphabet, parts[2][len(parts[2])-1])+1]
	for name, bad := range map[string]string{
		"a line break in the signature":    parts[0] + "." + parts[1] + "." + parts[2][:4] + "\n" + parts[2][4:],
		"a carriage return at the end":     tok + "\r",
		"another last signature character": parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-1] + string(other),
		"a line break in the payload":      parts[0] + "." + parts[1][:2] + "\n" + parts[1][2:] + "." + parts[2],
	} {
		if s.Open(bad, &rec{}) {
			t.Errorf("%s: %q opened", name, bad)
		}
	}
}
