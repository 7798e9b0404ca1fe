package venue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/venue"
	"github.com/svc/engine/events"
	evidem "github.com/svc/engine/events/idem"
	evvenue "github.com/svc/engine/events/venue"
)

var (
	t0    = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	owner = venuecmd.Owner{UserID: "usr_1", Verified: true, Owner: true}
)

const manifest = `{"providerVersion":"1","protocolVersion":"1","schemaDigest":"` +
	"abababababababababababababababababababababababababababababababab" + `","capabilities":{"marketData":true}}`

func keyed(key, digest string, c commands.Command) commands.Envelope {
	return commands.Envelope{ID: ulid.Make(), At: t0, Key: key, Digest: digest, Cmd: c}
}

func decide(t *testing.T, s *venue.State, env commands.Envelope) ([]events.Event, error) {
	t.Helper()
	if err := env.Cmd.Validate(); err != nil {
		return nil, err
	}
	evs, err := venue.Decide(s, env)
	for _, e := range evs {
		venue.Apply(s, e)
	}
	return evs, err
}

func refusal(err error) (int, string) {
	var r *commands.Refusal
	if errors.As(err, &r) {
		return commands.StatusOf(r.Code, r.Malformed), string(r.Code)
	}
	return 0, ""
}

func opened(t *testing.T) *venue.State {
	s := venue.New("v1")
	if _, err := decide(t, s, keyed("k0", "d0", &venuecmd.CreateVenue{OrgID: "org_1", Name: "Acme", FirmTenantID: "firm_1", By: owner})); err != nil {
		t.Fatal(err)
	}
	return s
}

func issue(by venuecmd.Owner, id string) *venuecmd.IssueKey {
	return &venuecmd.IssueKey{KeyID: id, Digest: "dg-" + id, Prefix: "svc_vk_sandbox_abcd", Env: "sandbox", Name: "ci",
		Scopes: []string{venuecmd.ScopeAccountRead}, ExpiresAt: t0.Add(time.Hour), Now: t0, By: by}
}

func TestVenueDecisions(t *testing.T) {
	cases := []struct {
		name   string
		given  func(t *testing.T) *venue.State
		env    commands.Envelope
		status int
		code   string
		check  func(t *testing.T, s *venue.State, evs []events.Event)
	}{
		{"a venue needs a verified owner", func(*testing.T) *venue.State { return venue.New("v1") },
			keyed("k", "d", &venuecmd.CreateVenue{OrgID: "org_1", Name: "Acme", By: venuecmd.Owner{UserID: "u", Owner: true}}), 403, "email_unverified", nil},
		{"a member who is not an owner creates none", func(*testing.T) *venue.State { return venue.New("v1") },
			keyed("k", "d", &venuecmd.CreateVenue{OrgID: "org_1", Name: "Acme", By: venuecmd.Owner{UserID: "u", Verified: true}}), 403, "permission_denied", nil},
		{"an unknown venue is not found", func(*testing.T) *venue.State { return venue.New("v9") },
			keyed("k", "d", issue(owner, "vk_1")), 404, "not_found", nil},
		{"an owner issues a key; the answer has no secret", opened, keyed("k1", "d1", issue(owner, "vk_1")), 0, "",
			func(t *testing.T, s *venue.State, evs []events.Event) {
				k := s.Keys["vk_1"]
				used := evs[len(evs)-1].(evidem.KeyUsed)
				if k == nil || k.Digest != "dg-vk_1" || used.Status != 201 || !strings.Contains(string(used.Body), `"secret":null`) || strings.Contains(string(used.Body), "dg-vk_1") {
					t.Fatalf("key %+v answer %s", k, used.Body)
				}
			}},
		{"the same key and request replay the first answer", func(t *testing.T) *venue.State {
			s := opened(t)
			if _, err := decide(t, s, keyed("k1", "d1", issue(owner, "vk_1"))); err != nil {
				t.Fatal(err)
			}
			return s
		}, keyed("k1", "d1", issue(owner, "vk_2")), 0, "", nil},
		{"the same key with another request conflicts", func(t *testing.T) *venue.State {
			s := opened(t)
			if _, err := decide(t, s, keyed("k1", "d1", issue(owner, "vk_1"))); err != nil {
				t.Fatal(err)
			}
			return s
		}, keyed("k1", "d2", issue(owner, "vk_2")), 409, "idempotency_conflict", nil},
		{"a refusal leaves the key free", func(t *testing.T) *venue.State {
			s := opened(t)
			if _, err := decide(t, s, keyed("k1", "d1", issue(venuecmd.Owner{UserID: "u2", Verified: true}, "vk_1"))); err == nil {
				t.Fatal("a non-owner issued a key")
			}
			return s
		}, keyed("k1", "d2", issue(owner, "vk_1")), 0, "", nil},
		{"revoking an unknown key is not found", opened, keyed("k2", "d", &venuecmd.RevokeKey{KeyID: "vk_9", By: owner}), 404, "not_found", nil},
		{"a registration is a candidate keyed by its Idempotency-Key", opened,
			keyed("reg-1", "dr", &venuecmd.RegisterProvider{Name: "Acme Data", Manifest: []byte(manifest)}), 0, "",
			func(t *testing.T, s *venue.State, evs []events.Event) {
				p := evs[0].(evvenue.ProviderRegistered).Provider
				if p.State != "candidate" || p.CreationKey != "reg-1" || len(p.ManifestHash) != 64 || len(p.ID) != 36 || s.Providers[p.ID].Name != "Acme Data" {
					t.Fatalf("provider %+v", p)
				}
			}},
		{"a write without a key is a programming error, never a commit", opened,
			commands.Envelope{ID: ulid.Make(), At: t0, Cmd: issue(owner, "vk_1")}, -1, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.given(t)
			evs, err := decide(t, s, tc.env)
			var replay *commands.Replay
			switch {
			case tc.status == -1:
				if err == nil || len(evs) != 0 {
					t.Fatalf("committed %v", evs)
				}
			case tc.status != 0:
				if st, code := refusal(err); st != tc.status || code != tc.code || len(evs) != 0 {
					t.Fatalf("got %d %s (%v), events %v", st, code, err, evs)
				}
			case errors.As(err, &replay):
				if replay.Status != 201 || len(evs) != 0 || s.Keys["vk_2"] != nil {
					t.Fatalf("replay %+v", replay)
				}
			case err != nil:
				t.Fatal(err)
			case tc.check != nil:
				tc.check(t, s, evs)
			}
		})
	}
}

func TestVenueReplayRebuildsTheSameState(t *testing.T) {
	r := enginetest.NewReplay(t, enginetest.Core[*venue.State]{New: func() *venue.State { return venue.New("v1") },
		Decide: venue.Decide, Apply: venue.Apply, Registry: events.Merge(evvenue.Registry(), evidem.Registry())})
	seen := map[string]bool{}
	do := func(env commands.Envelope) {
		if err := env.Cmd.Validate(); err != nil {
			t.Fatal(err)
		}
		for _, e := range r.Do(env) {
			seen[e.Type()] = true
		}
	}
	do(keyed("k0", "d0", &venuecmd.CreateVenue{OrgID: "org_1", Name: "Acme", FirmTenantID: "firm_1", By: owner}))
	do(keyed("k1", "d1", issue(owner, "vk_1")))
	do(keyed("k2", "d2", &venuecmd.RevokeKey{KeyID: "vk_1", By: owner}))
	do(keyed("k3", "d3", &venuecmd.RegisterProvider{Name: "Acme Data", Manifest: []byte(manifest)}))
	do(keyed("k4", "d4", &venuecmd.SetConfig{Kind: venuecmd.KindInstruments, ID: "BTC-PERP", Body: []byte(`{"active":true,"maxQuantity":"5"}`)}))
	do(keyed("k5", "d5", &venuecmd.SetConfig{Kind: venuecmd.KindRoutes, ID: "paper", Body: []byte(`{"target":"paper"}`)}))
	do(keyed("k6", "d6", &venuecmd.SetConfig{Kind: venuecmd.KindGroups, ID: "g1", Body: []byte(`{"name":"G","instruments":["BTC-PERP"],"routeId":"paper"}`)}))
	do(keyed("k7", "d7", &venuecmd.SetConfig{Kind: venuecmd.KindRoutes, ID: "paper", IfVersion: 1, Retire: true}))
	do(keyed("k8", "d8", &venuecmd.StatePolicy{PolicyID: "house", Version: "1",
		Body: []byte(`{"authority":"v1","posting":{"currency":"USD","decimals":2},"dailyLossLimit":{"value":"500","sourced":true}}`)}))
	do(keyed("k9", "d9", &venuecmd.PublishPolicy{PolicyID: "house", Version: "1"}))
	do(keyed("k10", "d10", &venuecmd.IssueKey{KeyID: "vk_2", Digest: "dg-vk_2", Prefix: "svc_vk_sandbox_abcd", Env: "sandbox", Name: "ops",
		Scopes: []string{venuecmd.ScopeAccountManage}, ExpiresAt: t0.Add(time.Hour), Now: t0, By: owner}))
	do(keyed("k11", "d11", &venuecmd.HoldLive{Reason: "incident", By: venuecmd.Actor{KeyID: "vk_2"}}))
	do(keyed("k12", "d12", &venuecmd.HoldLive{Trader: "a@example.com", Reason: "kyc", By: venuecmd.Actor{Owner: &owner, Email: "o@example.com"}}))
	do(keyed("k13", "d13", &venuecmd.HoldLive{Reason: "incident: exchange down", By: venuecmd.Actor{KeyID: "vk_2"}}))
	do(keyed("k14", "d14", &venuecmd.ReleaseLive{By: venuecmd.Actor{KeyID: "vk_2"}}))
	if ts := venue.Terms(r.Live(), 7); ts["v1/g1"] == nil || ts["v1/g1"].Route != "" || !ts["v1/g1"].Permitted["BTC-PERP"].IsZero() && ts["v1/g1"].Permitted["BTC-PERP"].String() != "5" {
		t.Fatalf("terms %+v", ts["v1/g1"])
	}
	for name := range events.Merge(evvenue.Registry(), evidem.Registry()) {
		if !seen[name] {
			t.Errorf("the script records no %s", name)
		}
	}
	r.Check()
}
