package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/engine/mail"
)

// keyedAs sends a write with the browser's session, the engine's own Origin
// and an Idempotency-Key, and answers the status and the decoded body.
func (b *browser) keyedAs(method, path, key string, body any) (int, map[string]any) {
	b.t.Helper()
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, b.base+path, bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", b.base)
	req.Header.Set("Idempotency-Key", key)
	req.AddCookie(&http.Cookie{Name: "svc_session", Value: b.cookie})
	resp, err := client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

// signUp signs a user up and in; verified says whether the mail's link is followed first.
func signUp(t *testing.T, base, dir, email string, verified bool) *browser {
	t.Helper()
	const password = "an attack password"
	b := &browser{t: t, base: base}
	if st, m := b.do("POST", "/api/auth/signup", map[string]string{"email": email, "password": password}); st != 201 {
		t.Fatalf("signup %s: %d %v", email, st, m)
	}
	if verified {
		msg, file, err := mail.Latest(filepath.Join(dir, "mail"), email)
		if err != nil {
			t.Fatalf("no mail to %s: %v", email, err)
		}
		token, ok := mail.Token(msg.Text)
		if !ok {
			t.Fatalf("%s carries no token", file)
		}
		if st, m := b.do("POST", "/api/auth/verify", map[string]string{"token": token, "password": password}); st != 200 {
			t.Fatalf("verify %s: %d %v", email, st, m)
		}
	}
	if st, m := b.do("POST", "/api/auth/login", map[string]string{"email": email, "password": password}); st != 200 || b.cookie == "" {
		t.Fatalf("login %s: %d %v", email, st, m)
	}
	return b
}

func params(m map[string]any) map[string]any { p, _ := m["params"].(map[string]any); return p }

// TestChallengeAttacksAreRefused: an unverified user enrolls in a free
// program, and a venue owner chains a program of theirs into another
// venue's program; both are refused and record nothing.
func TestChallengeAttacksAreRefused(t *testing.T) {
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, "CHALLENGES_ENABLED=true")
	enroll := map[string]any{"challengeId": app.SampleStage1, "accountSize": 10000, "accountType": "standard"}

	t.Run("an unverified user enrolls", func(t *testing.T) {
		u := signUp(t, p.base, dir, "unverified@attack.example", false)
		st, m := u.keyedAs("POST", "/api/enrollments", "enr-1", enroll)
		if st != http.StatusForbidden || m["code"] != "email_unverified" {
			t.Fatalf("an unverified enrollment: %d %v", st, m)
		}
		if st, m := u.do("GET", "/api/enrollments", nil); st != 200 || len(m["enrollments"].([]any)) != 0 {
			t.Fatalf("the refused enrollment is listed: %d %v", st, m)
		}
		v := signUp(t, p.base, dir, "verified@attack.example", true)
		if st, m := v.keyedAs("POST", "/api/enrollments", "enr-1", enroll); st != http.StatusCreated {
			t.Fatalf("a verified enrollment: %d %v", st, m)
		}
	})

	t.Run("a program chains into another venue's program", func(t *testing.T) {
		owner := signUp(t, p.base, dir, "chain@attack.example", true)
		st, m := owner.do("POST", "/api/organizations", map[string]string{"name": "Chain Co"})
		if st != 201 {
			t.Fatalf("org: %d %v", st, m)
		}
		org := m["organization"].(map[string]any)["id"].(string)
		st, m = owner.keyedAs("POST", "/api/back-office/venues", "v-1", map[string]any{"orgId": org, "name": "Chain Venue"})
		if st != 201 {
			t.Fatalf("venue: %d %v", st, m)
		}
		venueID := m["venue"].(map[string]any)["id"].(string)
		const id = "0b5c7a3e-aaaa-4222-8333-444455556666"
		prog := map[string]any{"venueId": venueID, "name": "Hijack", "description": "", "isActive": true, "stage": 1,
			"nextChallengeId": app.SampleStage2, "allowedTypes": []string{"standard"}, "accountSizes": []any{5000}, "currency": "USD",
			"priceCents": 0, "profitTargetPct": 1, "maxDailyDdPct": 50, "maxTotalDdPct": 50, "ddMode": "static", "minTradingDays": 0,
			"maxDurationDays": nil, "allowWeekendHold": true, "profitSharePct": nil}
		st, m = owner.keyedAs("PUT", "/api/challenges/"+id, "p-1", prog)
		if st != http.StatusBadRequest || m["code"] != "invalid_request" || params(m)["field"] != "nextChallengeId" {
			t.Fatalf("a chain into the demo venue's stage 2: %d %v", st, m)
		}
		if st, m := owner.do("GET", "/api/challenges", nil); st != 200 || len(m["challenges"].([]any)) != 3 {
			t.Fatalf("the refused program is listed: %d %v", st, m)
		}
		prog["nextChallengeId"] = nil
		if st, m := owner.keyedAs("PUT", "/api/challenges/"+id, "p-2", prog); st != http.StatusCreated {
			t.Fatalf("the program without the chain: %d %v", st, m)
		}
	})
}
