package codegen_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/svc/engine/commands/internal/codegen"
)

const root = "../../.."

// The committed outputs are what commands/codes.json generates now: after a
// change of the catalogue, run go generate ./commands/.
func TestTheGeneratedOutputsAreCurrent(t *testing.T) {
	out, err := codegen.Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{codegen.GoFile, codegen.Spec, codegen.DocFile} {
		got, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, out[p]) {
			t.Errorf("%s is stale: commands/codes.json generates another; run go generate ./commands/", p)
		}
	}
}

// A code added to the catalogue reaches the constants, the enum and the
// table, and the document's bytes outside the markers stay as they are.
func TestACatalogueEntryReachesEveryOutput(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{codegen.Source, codegen.Spec} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if p == codegen.Source {
			b = bytes.Replace(b, []byte("[\n"), []byte(`[
  {"code": "hedge_ratio_exceeded", "status": [422], "retrySafe": false, "params": ["instrument"], "description": "The order would take the account past its hedge ratio."},
`), 1)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := codegen.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out[codegen.GoFile], []byte(`CodeHedgeRatioExceeded Code = "hedge_ratio_exceeded"`)) {
		t.Errorf("codes_gen.go has no constant of the new code:\n%s", out[codegen.GoFile])
	}
	if !bytes.Contains(out[codegen.DocFile], []byte("| `hedge_ratio_exceeded` | 422 | no | `instrument` |")) {
		t.Errorf("docs/codes.md has no row of the new code")
	}
	old, _ := os.ReadFile(filepath.Join(root, codegen.Spec))
	if want := strings.Replace(string(old), "        - holds_unreadable\n", "        - hedge_ratio_exceeded\n        - holds_unreadable\n", 1); string(out[codegen.Spec]) != want {
		t.Errorf("openapi.yaml changed otherwise than by the new enum item")
	}
}

// A catalogue that breaks its own rules is refused, naming the code.
func TestABadCatalogueIsRefused(t *testing.T) {
	for name, entry := range map[string]string{
		"retry-after without retry-safe": `{"code": "x_y", "status": [409], "retrySafe": false, "retryAfter": 1, "description": "X."}`,
		"retry-safe without retry-after": `{"code": "x_y", "status": [503], "retrySafe": true, "description": "X."}`,
		"not snake case":                 `{"code": "XY", "status": [409], "retrySafe": false, "description": "X."}`,
		"no sentence":                    `{"code": "x_y", "status": [409], "retrySafe": false, "description": ""}`,
		"unknown field":                  `{"code": "x_y", "status": [409], "retrySafe": false, "description": "X.", "retry": 1}`,
		"listed twice":                   `{"code": "x_y", "status": [409], "retrySafe": false, "description": "X."}, {"code": "x_y", "status": [409], "retrySafe": false, "description": "X."}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "commands"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, codegen.Source), []byte("["+entry+"]"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := codegen.Read(dir); err == nil || !strings.Contains(err.Error(), "codes.json") {
				t.Fatalf("Read accepted it or did not name the file: %v", err)
			}
		})
	}
}

func TestIdentsFollowGoInitialisms(t *testing.T) {
	got := []string{codegen.Ident("api_key_required"), codegen.Ident("risk_policy_id_reserved"), codegen.Ident("risk_locked")}
	if want := []string{"CodeAPIKeyRequired", "CodeRiskPolicyIDReserved", "CodeRiskLocked"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
