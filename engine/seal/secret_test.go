package seal_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/svc/engine/engine/seal"
)

// A Secret reaches no log line and no JSON answer, whichever way it is
// printed, alone or inside a value.
func TestSecretNeverPrints(t *testing.T) {
	const plain = "hunter2-api-secret-0123456789abcdef"
	s := seal.NewSecret([]byte(plain))
	type link struct {
		APIKey string
		Secret seal.Secret
		Ptr    *seal.Secret
	}
	l := link{APIKey: "public", Secret: s, Ptr: &s}
	hexPlain := fmt.Sprintf("%x", plain)

	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		for _, v := range []any{s, &s, l, &l, []seal.Secret{s}, map[string]seal.Secret{"k": s}} {
			outs = append(outs, verb+" "+fmt.Sprintf(verb, v))
		}
	}
	outs = append(outs, fmt.Sprint(s), fmt.Sprintln(l), s.String(), s.GoString())
	for _, v := range []any{s, &s, l, map[string]any{"secret": s}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, "json "+string(b))
	}
	if b, err := json.Marshal(l); err != nil || !strings.Contains(string(b), `"Secret":"[sealed]"`) {
		t.Fatalf("json %s, %v: want the field as \"[sealed]\"", b, err)
	}
	text, _ := s.MarshalText()
	bin, _ := s.MarshalBinary()
	outs = append(outs, "text "+string(text), "binary "+string(bin))

	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&buf, nil), slog.NewTextHandler(&buf, nil)} {
		lg := slog.New(h)
		lg.Info("linking", "secret", s, "ptr", &s, "link", l)
		lg.Info("linking", slog.Any("secret", s), slog.Group("g", "secret", s))
		lg.With("secret", s).Error("failed", "err", fmt.Errorf("sign with %v", s))
	}
	outs = append(outs, buf.String())

	for _, out := range outs {
		if strings.Contains(out, plain) || strings.Contains(out, hexPlain) || strings.Contains(strings.ToLower(out), hexPlain) ||
			strings.Contains(out, "hunter2") {
			t.Fatalf("the secret shows in %s", out)
		}
		if !strings.Contains(out, "[sealed]") {
			t.Fatalf("%s: want [sealed] in place of the secret", out)
		}
	}
	if string(s.Reveal()) != plain || s.Len() != len(plain) {
		t.Fatal("Reveal does not give the secret")
	}
}

// A Secret comes in from a request's JSON, and goes out as "[sealed]".
func TestSecretFromJSON(t *testing.T) {
	var body struct {
		APIKey string      `json:"apiKey"`
		Secret seal.Secret `json:"apiSecret"`
	}
	if err := json.Unmarshal([]byte(`{"apiKey":"k","apiSecret":"s3cr3t\u00e9"}`), &body); err != nil {
		t.Fatal(err)
	}
	if string(body.Secret.Reveal()) != "s3cr3té" {
		t.Fatalf("decoded %q", body.Secret.Reveal())
	}
	out, _ := json.Marshal(body)
	if string(out) != `{"apiKey":"k","apiSecret":"[sealed]"}` {
		t.Fatalf("encoded %s", out)
	}
	if err := json.Unmarshal([]byte(`{"apiSecret":12345678}`), &body); err == nil || strings.Contains(err.Error(), "12345678") {
		t.Fatalf("a number taken as a secret, or echoed: %v", err)
	}
	body.Secret.Wipe()
	if !bytes.Equal(body.Secret.Reveal(), make([]byte, len("s3cr3té"))) {
		t.Fatal("Wipe left the bytes")
	}
}
