package seal

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealedBinaryRoundTrip(t *testing.T) {
	s := Sealed{DataKey: DataKeyID{1, 2, 3}, Nonce: [12]byte{9, 8}, Ciphertext: bytes.Repeat([]byte{7}, 40)}
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != headerLen+40 || b[0] != 1 {
		t.Fatalf("form of %d bytes, format %d", len(b), b[0])
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.DataKey != s.DataKey || got.Nonce != s.Nonce || !bytes.Equal(got.Ciphertext, s.Ciphertext) {
		t.Fatalf("read back %+v", got)
	}
	b[len(b)-1] = 0 // the decoded value holds its own copy
	if got.Ciphertext[len(got.Ciphertext)-1] != 7 {
		t.Fatal("the decoded ciphertext shares the input's bytes")
	}
}

func TestSealedBinaryRefuses(t *testing.T) {
	ok, _ := Sealed{Ciphertext: make([]byte, tagLen)}.MarshalBinary()
	cases := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"other format", append([]byte{2}, ok[1:]...)},
		{"no tag", ok[:len(ok)-1]},
		{"header only", ok[:headerLen]},
		{"too long", append(append([]byte{}, ok...), make([]byte, MaxPlaintext+1)...)},
	}
	for _, c := range cases {
		if _, err := Parse(c.b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", c.name, err)
		}
	}
	if _, err := (Sealed{}).MarshalBinary(); !errors.Is(err, ErrMalformed) {
		t.Errorf("the zero Sealed marshalled: %v", err)
	}
	if _, err := Parse(ok[:headerLen+tagLen]); err != nil {
		t.Errorf("the shortest form (an empty secret) refused: %v", err)
	}
}

// A sealed secret opens for its own link under its own data key only, and
// not once any byte of it is changed.
func TestOpenWith(t *testing.T) {
	dk := bytes.Repeat([]byte{5}, KeyLen)
	other := bytes.Repeat([]byte{6}, KeyLen)
	id := DataKeyID{1}
	s, err := sealWith(dk, id, "link-a", []byte("api secret"))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := openWith(dk, id, "link-a", s); err != nil || string(pt) != "api secret" {
		t.Fatalf("opened %q, %v", pt, err)
	}
	flip := func(f func(*Sealed)) Sealed {
		c := Sealed{DataKey: s.DataKey, Nonce: s.Nonce, Ciphertext: append([]byte(nil), s.Ciphertext...)}
		f(&c)
		return c
	}
	cases := []struct {
		name   string
		dk     []byte
		link   string
		s      Sealed
		wantIs error
	}{
		{"another link", dk, "link-b", s, ErrNotAuthentic},
		{"a link id one byte longer", dk, "link-a\x00", s, ErrNotAuthentic},
		{"another data key of the same id", other, "link-a", s, ErrNotAuthentic},
		{"a ciphertext bit flipped", dk, "link-a", flip(func(c *Sealed) { c.Ciphertext[0] ^= 1 }), ErrNotAuthentic},
		{"the tag flipped", dk, "link-a", flip(func(c *Sealed) { c.Ciphertext[len(c.Ciphertext)-1] ^= 0x80 }), ErrNotAuthentic},
		{"the nonce changed", dk, "link-a", flip(func(c *Sealed) { c.Nonce[11] ^= 1 }), ErrNotAuthentic},
		{"truncated", dk, "link-a", flip(func(c *Sealed) { c.Ciphertext = c.Ciphertext[:len(c.Ciphertext)-1] }), ErrNotAuthentic},
		{"the data key id changed", dk, "link-a", flip(func(c *Sealed) { c.DataKey[0] ^= 1 }), ErrDestroyed},
	}
	for _, c := range cases {
		if pt, err := openWith(c.dk, id, c.link, c.s); !errors.Is(err, c.wantIs) || pt != nil {
			t.Errorf("%s: opened %q, %v; want %v", c.name, pt, err, c.wantIs)
		}
	}
}

func FuzzUnmarshalBinary(f *testing.F) {
	ok, _ := Sealed{DataKey: DataKeyID{1}, Ciphertext: make([]byte, 30)}.MarshalBinary()
	for _, b := range [][]byte{nil, {1}, {2}, ok, ok[:headerLen+tagLen-1]} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Sealed
		if err := s.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		again, err := s.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%x read and written again as %x, %v", b, again, err)
		}
	})
}
