package tenant_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine/tenant"
	"github.com/svc/engine/events"
	evtenant "github.com/svc/engine/events/tenant"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func digest(c byte) string { return strings.Repeat(string(c), 64) }

func signUp() *tenantcmd.SignUp {
	return &tenantcmd.SignUp{Email: "Ann@Example.com", PasswordHash: "$argon2id$h1", VerifyDigest: digest('v'), VerifyUntil: t0.Add(24 * time.Hour)}
}

// run decides cmds in order on a fresh user, applying what each records,
// and returns the state, the events of the last command and its error.
func run(t *testing.T, at time.Time, cmds ...commands.Command) (*tenant.State, []events.Event, error) {
	t.Helper()
	s := tenant.New(tenantcmd.UserID("ann@example.com"))
	var evs []events.Event
	var err error
	for i, c := range cmds {
		if err := c.Validate(); err != nil {
			t.Fatalf("command %d %T: %v", i, c, err)
		}
		evs, err = tenant.Decide(s, commands.Envelope{ID: ulid.Make(), At: at, Cmd: c})
		if err != nil && i < len(cmds)-1 {
			t.Fatalf("command %d %T refused: %v", i, c, err)
		}
		for _, e := range evs {
			s = tenant.Apply(s, e)
		}
	}
	return s, evs, err
}

func code(err error) string {
	var r *commands.Refusal
	if errors.As(err, &r) {
		return string(r.Code)
	}
	return ""
}

func TestIdentityRefusals(t *testing.T) {
	key := func(byUser bool) *tenantcmd.IssueKey {
		return &tenantcmd.IssueKey{KeyID: ulid.Make().String(), Digest: digest('k'), Kind: "trading", Prefix: "svc_sk_1234", ByUser: byUser}
	}
	verified := &tenantcmd.VerifyEmail{Digest: digest('v')}
	cases := []struct {
		name string
		at   time.Time
		cmds []commands.Command
		want string
	}{
		{"verify with another token", t0, []commands.Command{signUp(), &tenantcmd.VerifyEmail{Digest: digest('x')}}, "invalid_token"},
		{"verify after 24 hours", t0.Add(24 * time.Hour), []commands.Command{signUp(), verified}, "invalid_token"},
		{"verify twice", t0, []commands.Command{signUp(), verified, verified}, "invalid_token"},
		{"verify an unknown user", t0, []commands.Command{verified}, "not_found"},
		{"a key before verification", t0, []commands.Command{signUp(), key(true)}, "email_unverified"},
		{"reset with no reset asked", t0, []commands.Command{signUp(), &tenantcmd.ConfirmReset{Digest: digest('r'), PasswordHash: "h2"}}, "invalid_token"},
		{"reset after its hour", t0.Add(2 * time.Hour), []commands.Command{signUp(), &tenantcmd.RequestReset{Digest: digest('r'), Until: t0.Add(time.Hour)},
			&tenantcmd.ConfirmReset{Digest: digest('r'), PasswordHash: "h2"}}, "invalid_token"},
		{"a reset token used twice", t0, []commands.Command{signUp(), &tenantcmd.RequestReset{Digest: digest('r'), Until: t0.Add(time.Hour)},
			&tenantcmd.ConfirmReset{Digest: digest('r'), PasswordHash: "h2"}, &tenantcmd.ConfirmReset{Digest: digest('r'), PasswordHash: "h3"}}, "invalid_token"},
		{"a key that expired already", t0, []commands.Command{signUp(), verified,
			&tenantcmd.IssueKey{KeyID: "k1", Digest: digest('k'), Kind: "trading", ByUser: true, ExpiresAt: t0.Add(-time.Minute)}}, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, evs, err := run(t, tc.at, tc.cmds...)
			if code(err) != tc.want || len(evs) != 0 {
				t.Fatalf("got %v (code %q) with %d events, want %s and none", err, code(err), len(evs), tc.want)
			}
		})
	}
	t.Run("a demo account before verification", func(t *testing.T) {
		if _, evs, err := run(t, t0, signUp(), &tenantcmd.ReserveDemo{AccountID: "a1"}); code(err) != "email_unverified" || len(evs) != 0 {
			t.Fatalf("got %v %v", evs, err)
		}
	})
	t.Run("a user's 11th demo account; the same one again records nothing", func(t *testing.T) {
		cmds := []commands.Command{signUp(), verified}
		for i := 0; i < tenantcmd.MaxDemoAccounts; i++ {
			cmds = append(cmds, &tenantcmd.ReserveDemo{AccountID: fmt.Sprint("a", i)})
		}
		if _, evs, err := run(t, t0, append(cmds, &tenantcmd.ReserveDemo{AccountID: "a0"})...); err != nil || len(evs) != 0 {
			t.Fatalf("a repeat: %v %v", evs, err)
		}
		if _, evs, err := run(t, t0, append(cmds, &tenantcmd.ReserveDemo{AccountID: "a10"})...); code(err) != "account_limit_reached" || len(evs) != 0 {
			t.Fatalf("the 11th: %v %v", evs, err)
		}
	})
	t.Run("a user's 26th live key", func(t *testing.T) {
		cmds := []commands.Command{signUp(), verified}
		for i := 0; i < tenantcmd.MaxKeys; i++ {
			cmds = append(cmds, key(true))
		}
		cmds = append(cmds, key(true))
		if _, _, err := run(t, t0, cmds...); code(err) != "key_limit_reached" {
			t.Fatalf("got %v", err)
		}
		// a revoked key frees its place
		s, _, _ := run(t, t0, cmds[:len(cmds)-1]...)
		for id := range s.Keys {
			evs, err := tenant.Decide(s, commands.Envelope{At: t0, Cmd: &tenantcmd.RevokeKey{KeyID: id}})
			if err != nil {
				t.Fatal(err)
			}
			s = tenant.Apply(s, evs[0])
			break
		}
		if evs, err := tenant.Decide(s, commands.Envelope{At: t0, Cmd: key(true)}); err != nil || len(evs) != 1 {
			t.Fatalf("a key after a revocation: %v %v", evs, err)
		}
	})
}

func TestIdentityTransitions(t *testing.T) {
	t.Run("sign-up creates a user with a password and a pending verification", func(t *testing.T) {
		s, evs, err := run(t, t0, signUp())
		if err != nil || len(evs) != 3 {
			t.Fatalf("%v %v", evs, err)
		}
		if s.Kind != "user" || s.Email != "ann@example.com" || s.Verified || s.PasswordHash != "$argon2id$h1" || s.Verify.Digest != digest('v') {
			t.Fatalf("state %+v", s)
		}
	})
	t.Run("a second sign-up records nothing", func(t *testing.T) {
		s, evs, err := run(t, t0, signUp(), &tenantcmd.SignUp{Email: "ANN@example.com", PasswordHash: "other", VerifyDigest: digest('w'), VerifyUntil: t0.Add(time.Hour)})
		if err != nil || len(evs) != 0 || s.PasswordHash != "$argon2id$h1" {
			t.Fatalf("%v %v %q", evs, err, s.PasswordHash)
		}
	})
	t.Run("verification within a day", func(t *testing.T) {
		s, evs, err := run(t, t0.Add(23*time.Hour), signUp(), &tenantcmd.VerifyEmail{Digest: digest('v')})
		if err != nil || len(evs) != 1 || !s.Verified || !s.Verify.Used {
			t.Fatalf("%v %v %+v", evs, err, s)
		}
	})
	t.Run("a reset sets the password and ends every session", func(t *testing.T) {
		s, evs, err := run(t, t0, signUp(),
			&tenantcmd.StartSession{SessionID: "s2", Until: t0.Add(time.Hour)},
			&tenantcmd.StartSession{SessionID: "s1", Until: t0.Add(time.Hour)},
			&tenantcmd.RequestReset{Digest: digest('r'), Until: t0.Add(time.Hour)},
			&tenantcmd.ConfirmReset{Digest: digest('r'), PasswordHash: "h2"})
		if err != nil || len(evs) != 3 || s.PasswordHash != "h2" || len(s.Sessions) != 0 {
			t.Fatalf("%v %v %+v", evs, err, s)
		}
		if e := evs[1].(evtenant.SessionEnded); e.SessionID != "s1" || e.Reason != "password_reset" {
			t.Fatalf("sessions end in id order: %+v", evs[1:])
		}
	})
	t.Run("logging out twice records one end", func(t *testing.T) {
		s, evs, err := run(t, t0, signUp(), &tenantcmd.StartSession{SessionID: "s1", Until: t0.Add(time.Hour)},
			&tenantcmd.EndSession{SessionID: "s1"}, &tenantcmd.EndSession{SessionID: "s1"})
		if err != nil || len(evs) != 0 || len(s.Sessions) != 0 {
			t.Fatalf("%v %v", evs, err)
		}
	})
	t.Run("a verified user's key, then its revocation", func(t *testing.T) {
		s, _, err := run(t, t0, signUp(), &tenantcmd.VerifyEmail{Digest: digest('v')},
			&tenantcmd.IssueKey{KeyID: "k1", Digest: digest('k'), Kind: "trading", Name: "bot", ByUser: true, ExpiresAt: t0.Add(time.Hour)},
			&tenantcmd.RevokeKey{KeyID: "k1"})
		if err != nil || !s.Revoked["k1"] || s.Keys["k1"].Name != "bot" || s.LiveKeys(t0) != 0 {
			t.Fatalf("%v %+v", err, s)
		}
	})
	t.Run("an expired key is not live", func(t *testing.T) {
		s, _, _ := run(t, t0, signUp(), &tenantcmd.MarkVerified{},
			&tenantcmd.IssueKey{KeyID: "k1", Digest: digest('k'), Kind: "trading", ByUser: true, ExpiresAt: t0.Add(time.Hour)})
		if s.LiveKeys(t0) != 1 || s.LiveKeys(t0.Add(time.Hour)) != 0 {
			t.Fatal("expiry not counted")
		}
	})
}

func TestUserIDIgnoresCase(t *testing.T) {
	if tenantcmd.UserID("Ann@Example.COM") != tenantcmd.UserID("ann@example.com") || tenantcmd.UserID("a@b.co") == tenantcmd.UserID("b@b.co") {
		t.Fatal("UserID")
	}
}

func TestPasswordShape(t *testing.T) {
	for pw, ok := range map[string]bool{
		"short":                  false,
		"twelve chars":           true,
		"with\x00nul in it":      false,
		"with\nnewline in it":    false,
		strings.Repeat("x", 257): false,
		"pässwörd mit ümlauten":  true,
		string([]byte{0xff, 0xfe}) + "aaaaaaaaaaaaa": false,
	} {
		if err := tenantcmd.Password("password", pw); (err == nil) != ok {
			t.Errorf("Password(%q) = %v", pw, err)
		}
	}
}
