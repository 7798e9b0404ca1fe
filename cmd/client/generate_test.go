package client_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The committed client.gen.go is what schema/openapi.yaml generates now:
// after a change of the document, run go generate ./cmd/client/.
func TestTheClientIsGeneratedFromTheDocument(t *testing.T) {
	out := filepath.Join(t.TempDir(), "client.gen.go")
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", "oapi-codegen.yaml", "-o", out, "../../schema/openapi.yaml")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("cmd/client/client.gen.go is stale: schema/openapi.yaml generates another client; run go generate ./cmd/client/")
	}
}
