package provider_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
)

func TestTokenNeverPrinted(t *testing.T) {
	tok := provider.Token{Access: "ACCESS-abcdef", MarketData: "MDTOKEN-123", ExpiresAt: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC),
		UserID: "50001", Login: "trader1", Environment: provider.EnvLive}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("renewed", "token", tok, "ptr", &tok)
	j, _ := json.Marshal(map[string]any{"t": tok})
	outs := []string{
		fmt.Sprint(tok), fmt.Sprintf("%v %+v %#v %s %q %x", tok, tok, tok, tok, tok, tok), fmt.Sprintf("%v", &tok),
		fmt.Errorf("resume %v: %w", tok, errors.New("x")).Error(), logs.String(), string(j),
	}
	for _, s := range outs {
		if strings.Contains(s, "ACCESS") || strings.Contains(s, "MDTOKEN") || strings.Contains(s, "414343455353") {
			t.Fatalf("token printed: %s", s)
		}
		if !strings.Contains(s, "[redacted]") {
			t.Fatalf("no [redacted] in %s", s)
		}
	}
	renewed := tok
	renewed.Access, renewed.ExpiresAt = "ACCESS-new", tok.ExpiresAt.Add(time.Hour)
	if tok.ID() == "" || tok.ID() != renewed.ID() || strings.Contains(tok.ID(), "ACCESS") {
		t.Fatalf("ID %q is not a stable digest of the login", tok.ID())
	}
	demo := tok
	demo.Environment = provider.EnvDemo
	if demo.ID() == tok.ID() {
		t.Fatalf("the same user id in both environments has one ID")
	}
	if !tok.Valid() || (provider.Token{Access: "a"}).Valid() {
		t.Fatalf("Valid")
	}
	if tok.Expired(tok.ExpiresAt.Add(-time.Second)) || !tok.Expired(tok.ExpiresAt) {
		t.Fatalf("Expired")
	}
}

func TestNotEntitledMatchesItsSentinel(t *testing.T) {
	err := fmt.Errorf("quotes: %w", &provider.NotEntitled{Reason: provider.EntitlementDemoLogin})
	var ne *provider.NotEntitled
	if !errors.Is(err, provider.ErrNotEntitled) || !errors.As(err, &ne) || ne.Reason != provider.EntitlementDemoLogin {
		t.Fatalf("%v", err)
	}
}
