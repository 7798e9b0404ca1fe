package venue

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/svc/engine/commands"
)

// FuzzManifest: on any bytes ParseManifest, Validate and the digests never
// panic; every refusal is a 400 *commands.Refusal naming a field under
// manifest; and a manifest that validates re-marshals to its RFC 8785 form,
// which parses back to an equal manifest manifestWith the same digests.
func FuzzManifest(f *testing.F) {
	for _, s := range []string{
		execManifest(nil), mdManifest(nil), " " + mdManifest(nil) + "\n",
		execManifest(map[string]any{"orderTypes": []any{"market", "limit", "stop", "stop_limit"}, "timeInForce": []any{"day", "gtc", "ioc", "fok"}}),
		mdManifest(map[string]any{"accounts": true, "accountProvisioning": true, "positionModels": []any{"net"}}),
		withTop(map[string]any{"providerVersion": `a"b\c<>&é😀`}),
		execManifest(map[string]any{"replayRetentionSeconds": 604799}),
		execManifest(map[string]any{"foo": 1}), mdManifest(nil) + "{}", `{"providerVersion":`, `[]`, `null`, ``,
		strings.Replace(mdManifest(nil), `{`, `{"providerVersion":"2",`, 1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := ParseManifest(raw)
		if err != nil {
			checkManifestRefusal(t, err)
			return
		}
		h, ch := ManifestHash(m), CreationHash("feed", m) // defined on any parsed manifest
		if err := m.Validate(); err != nil {
			checkManifestRefusal(t, err)
			return
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		canon := m.Canonical()
		checkCanonicalManifest(t, out, canon)
		for _, b := range [][]byte{out, canon} {
			m2, err := ParseManifest(b)
			if err != nil {
				t.Fatalf("re-parse of %s: %v", b, err)
			}
			if !reflect.DeepEqual(m, m2) {
				t.Fatalf("re-parse changed the manifest:\n %+v\n %+v", m, m2)
			}
			if err := m2.Validate(); err != nil {
				t.Fatalf("re-parsed manifest refused: %v", err)
			}
			if ManifestHash(m2) != h || CreationHash("feed", m2) != ch {
				t.Fatal("re-parsed manifest has other digests")
			}
		}
		if h != sha256Hex(string(canon)) {
			t.Fatal("ManifestHash is not the sha256 of the canonical form")
		}
	})
}

func checkManifestRefusal(t *testing.T, err error) {
	t.Helper()
	var r *commands.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error %v is not a *commands.Refusal", err)
	}
	field, _ := r.Params["field"].(string)
	if commands.StatusOf(r.Code, r.Malformed) != http.StatusBadRequest || (r.Code != "invalid_request" && r.Code != CodeUnsupportedValue) ||
		!(field == "manifest" || strings.HasPrefix(field, "manifest.")) {
		t.Fatalf("refusal %d %s field %q: %s", commands.StatusOf(r.Code, r.Malformed), r.Code, field, r.Msg)
	}
}
