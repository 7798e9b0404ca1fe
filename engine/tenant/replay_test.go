package tenant_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/tenant"
	"github.com/svc/engine/events"
	evtenant "github.com/svc/engine/events/tenant"
)

// Every tenant event, decided live, then written to the log in both
// encodings and read back, rebuilds the whole live state.
func TestReplayRebuildsTheSameState(t *testing.T) {
	r := enginetest.NewReplay(t, enginetest.Core[*tenant.State]{
		New:      func() *tenant.State { return tenant.New("t1") },
		Decide:   tenant.Decide,
		Apply:    tenant.Apply,
		Registry: evtenant.Registry(),
	})
	at, n := time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC), 0
	seen := map[string]bool{}
	do := func(cmd commands.Command) {
		t.Helper()
		if err := cmd.Validate(); err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
		n++
		id := ulid.MustParse("01J00000000000000000000000")
		id[15] = byte(n)
		for _, e := range r.Do(commands.Envelope{ID: id, At: at, Key: fmt.Sprint("k", n), Principal: events.Principal{System: "bootstrap"}, Cmd: cmd}) {
			seen[e.Type()] = true
		}
		at = at.Add(time.Minute)
	}
	digest := func(c string) string { return strings.Repeat(c, 64) }
	do(&tenantcmd.CreateTenant{Name: "Firm One", Kind: "firm", Email: "ops@example.com"})
	do(&tenantcmd.IssueKey{KeyID: "k1", Digest: digest("a"), Kind: "trading", Prefix: "svc_sk_a"})
	do(&tenantcmd.IssueKey{KeyID: "k2", Digest: digest("b"), Kind: "partner", Prefix: "svc_pk_b"})
	do(&tenantcmd.RevokeKey{KeyID: "k1"})
	r.Check()

	// A user: sign-up, verification, sessions, a reset, an operator grant.
	r = enginetest.NewReplay(t, enginetest.Core[*tenant.State]{
		New:      func() *tenant.State { return tenant.New(tenantcmd.UserID("ann@example.com")) },
		Decide:   tenant.Decide,
		Apply:    tenant.Apply,
		Registry: evtenant.Registry(),
	})
	do(&tenantcmd.SignUp{Email: "Ann@example.com", PasswordHash: "$argon2id$one", VerifyDigest: digest("v"), VerifyUntil: at.Add(24 * time.Hour)})
	do(&tenantcmd.VerifyEmail{Digest: digest("v")})
	do(&tenantcmd.IssueKey{KeyID: "k3", Digest: digest("c"), Kind: "trading", Prefix: "svc_sk_c", Name: "bot", ExpiresAt: at.Add(time.Hour), ByUser: true})
	do(&tenantcmd.ReserveDemo{AccountID: "acct_1"})
	do(&tenantcmd.StartSession{SessionID: "s1", Until: at.Add(time.Hour)})
	do(&tenantcmd.StartSession{SessionID: "s2", Until: at.Add(time.Hour)})
	do(&tenantcmd.EndSession{SessionID: "s1", Reason: "logout"})
	do(&tenantcmd.RequestReset{Digest: digest("r"), Until: at.Add(time.Hour)})
	do(&tenantcmd.ConfirmReset{Digest: digest("r"), PasswordHash: "$argon2id$two"})
	do(&tenantcmd.GrantOperator{VenueID: "ven_1", Scopes: []string{"account:read"}})
	do(&tenantcmd.SetLiveTrading{On: true})
	do(&tenantcmd.SetLiveTrading{On: false})

	for name := range evtenant.Registry() {
		if !seen[name] {
			t.Errorf("the script records no %s: add a command that does", name)
		}
	}
	r.Check()
}
