package seal_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/svc/engine/engine/seal"
)

// b64 is n bytes of a fixed pattern in standard base64.
func b64(n int, fill byte) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = fill + byte(i)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func TestParseKeys(t *testing.T) {
	k1, k2 := b64(32, 1), b64(32, 100)
	cases := []struct {
		name    string
		setting string
		ids     []string // the keyring's ids, current first; nil: refused
		wantErr string   // part of the refusal
	}{
		{name: "one key", setting: "k1:" + k1, ids: []string{"k1"}},
		{name: "two keys, the first current", setting: "k2:" + k2 + ",k1:" + k1, ids: []string{"k2", "k1"}},
		{name: "spaces around entries and parts", setting: "  k2 : " + k2 + " ,\tk1:" + k1 + "\n", ids: []string{"k2", "k1"}},
		{name: "ids of every allowed character", setting: "Key_2024-01:" + k1, ids: []string{"Key_2024-01"}},
		{name: "empty", setting: "", wantErr: "empty"},
		{name: "blank", setting: " \t\n", wantErr: "empty"},
		{name: "short key", setting: "k1:" + b64(16, 1), wantErr: `key "k1": 16 bytes, want 32`},
		{name: "31 bytes", setting: "k1:" + b64(31, 1), wantErr: `key "k1": 31 bytes, want 32`},
		{name: "48 bytes", setting: "k1:" + b64(48, 1), wantErr: `key "k1": 48 bytes, want 32`},
		{name: "far too long a key", setting: "k1:" + b64(100, 1), wantErr: `key "k1": not 32 bytes`},
		{name: "33 bytes", setting: "k1:" + b64(33, 1), wantErr: `key "k1": 33 bytes, want 32`},
		{name: "bad base64", setting: "k1:" + k1[:40] + "!!!=", wantErr: `key "k1": not standard base64`},
		{name: "base64 without padding", setting: "k1:" + strings.TrimRight(k1, "="), wantErr: `key "k1": not standard base64`},
		{name: "duplicate ids", setting: "k1:" + k1 + ",k1:" + k2, wantErr: `entry 2: id "k1" appears twice`},
		{name: "no id", setting: k1, wantErr: "entry 1 is not id:base64-key"},
		{name: "empty id", setting: ":" + k1, wantErr: "entry 1: the id must be"},
		{name: "id with a dot", setting: "k.1:" + k1, wantErr: "entry 1: the id must be"},
		{name: "id too long", setting: strings.Repeat("k", 33) + ":" + k1, wantErr: "entry 1: the id must be"},
		{name: "empty second entry", setting: "k1:" + k1 + ",", wantErr: "entry 2 is not id:base64-key"},
		{name: "missing key", setting: "k1:", wantErr: `key "k1": 0 bytes`},
		{name: "too many", setting: strings.Repeat("k:"+k1+",", 16) + "k:" + k1, wantErr: "17 entries, at most 16"},
		{name: "too long", setting: strings.Repeat("x", 4097), wantErr: "longer than 4096"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, err := seal.ParseKeys(c.setting)
			if c.ids == nil {
				if err == nil {
					t.Fatalf("accepted, keyring %v", k)
				}
				if !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %q, want it to say %q", err, c.wantErr)
				}
				for _, secret := range []string{k1, k2, k1[:20], k2[:20]} {
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("error %q holds key material", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := k.IDs(); fmt.Sprint(got) != fmt.Sprint(c.ids) || k.Current() != c.ids[0] {
				t.Fatalf("ids %v current %s, want %v", got, k.Current(), c.ids)
			}
		})
	}
}

// A keyring printed any way shows its ids, never a key.
func TestKeyringNeverPrintsKeys(t *testing.T) {
	k1, k2 := b64(32, 1), b64(32, 100)
	k, err := seal.ParseKeys("k2:" + k2 + ",k1:" + k1)
	if err != nil {
		t.Fatal(err)
	}
	raw1, _ := base64.StdEncoding.DecodeString(k1)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
		for _, v := range []any{k, *k, struct{ K *seal.Keyring }{k}} {
			out := fmt.Sprintf(verb, v)
			if strings.Contains(out, k1) || strings.Contains(out, k2) || strings.Contains(out, fmt.Sprintf("%x", raw1[:8])) {
				t.Fatalf("%s printed key material: %s", verb, out)
			}
			if !strings.Contains(out, "k2,k1") {
				t.Fatalf("%s printed %s, want the ids", verb, out)
			}
		}
	}
}

func TestNewKeySetting(t *testing.T) {
	a, err := seal.NewKeySetting("k9")
	if err != nil {
		t.Fatal(err)
	}
	b, err := seal.NewKeySetting("k8")
	if err != nil {
		t.Fatal(err)
	}
	k, err := seal.ParseKeys(a + "," + b)
	if err != nil {
		t.Fatal(err)
	}
	if k.Current() != "k9" || a[3:] == b[3:] {
		t.Fatalf("current %s; two fresh keys equal: %v", k.Current(), a[3:] == b[3:])
	}
	if _, err := seal.NewKeySetting("bad id"); err == nil {
		t.Fatal("an id with a space was taken")
	}
}

func TestUnknownKEKError(t *testing.T) {
	var err error = &seal.UnknownKEKError{KEK: "k1", Have: []string{"k2"}}
	var u *seal.UnknownKEKError
	if !errors.Is(err, seal.ErrUnknownKEK) || !errors.As(fmt.Errorf("wrapped: %w", err), &u) || u.KEK != "k1" {
		t.Fatalf("%v: not ErrUnknownKEK naming k1", err)
	}
}

func FuzzParseKeys(f *testing.F) {
	k1 := b64(32, 1)
	for _, s := range []string{"", "k1:" + k1, "k2:" + b64(32, 7) + ",k1:" + k1, "k1:" + k1 + ",k1:" + k1, ":", ",", "k1:!!", "k1:" + b64(31, 0),
		strings.Repeat("a:,", 20), "\x00:\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, setting string) {
		k, err := seal.ParseKeys(setting)
		if err != nil {
			// No key part long enough to be material appears in the error.
			for _, e := range strings.Split(setting, ",") {
				if _, key, ok := strings.Cut(e, ":"); ok {
					key = strings.TrimSpace(key)
					if len(key) >= 16 && !strings.ContainsAny(key, " \t\n") && strings.Contains(err.Error(), key) {
						t.Fatalf("error %q holds key part %q", err, key)
					}
				}
			}
			return
		}
		ids := k.IDs()
		if len(ids) == 0 || len(ids) > seal.MaxKeys || k.Current() != ids[0] {
			t.Fatalf("keyring %v from %q", ids, setting)
		}
	})
}
