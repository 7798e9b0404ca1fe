package app

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/svc/engine/commands"
	orgcmd "github.com/svc/engine/commands/org"
	tenantcmd "github.com/svc/engine/commands/tenant"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/projections"
)

// The sandbox's demo venue: the demo firm's, in an organization whose
// verified owner is DemoOwnerEmail.
const (
	DemoOwnerEmail = "owner@example.com"
	DemoOrg        = "org_demo"
)

// bootstrapVenue makes the demo firm a venue of the demo organization, owned
// by a verified user with a live session, and gives dev-credentials.json a
// venue key of every scope (venueKey) and the owner's session cookie
// (ownerSession) for the back office. A restart keeps a live key and session.
func bootstrapVenue(ctx context.Context, d *api.Deps, creds *credentials) (bool, error) {
	var old struct{ key, session string }
	if raw, ok := creds.raw["venueKey"]; ok {
		_ = json.Unmarshal(raw, &old.key)
	}
	if raw, ok := creds.raw["ownerSession"]; ok {
		_ = json.Unmarshal(raw, &old.session)
	}
	sys := events.Principal{System: "bootstrap"}
	uid := tenantcmd.UserID(DemoOwnerEmail)
	session, changed, err := demoUser(ctx, d, DemoOwnerEmail, old.session, nil)
	if err != nil {
		return false, err
	}
	settle := settleOnce(ctx, d)
	if err := settle(d.Engine.Org(ctx, DemoOrg, d.Engine.Envelope(sys, "", &orgcmd.Create{Name: "Demo Firm",
		By: orgcmd.Actor{UserID: uid, Email: DemoOwnerEmail, Verified: true}, Digest: "bootstrap"}))); err != nil {
		return false, err
	}
	owner := venuecmd.Owner{UserID: uid, Verified: true, Owner: true}
	venueID := evfirm.VenueID(DemoFirm)
	keyed := func(key string, cmd commands.Command) commands.Envelope { return keyedEnvelope(d, sys, key, cmd) }
	if err := settle(d.Engine.Venue(ctx, venueID, keyed("bootstrap-venue",
		&venuecmd.CreateVenue{OrgID: DemoOrg, Name: "Demo Venue", FirmTenantID: DemoFirm, By: owner}))); err != nil {
		return false, err
	}
	key := old.key
	if key != "" {
		k, err := projections.GetInto[projections.Key](ctx, d.Store, projections.CollKey, auth.Digest(key))
		if err != nil || k.Kind != "venue" || k.VenueID != venueID || !k.Live(time.Now().Add(7*24*time.Hour)) {
			key = ""
		}
	}
	if key == "" {
		prefix := "svc_vk_" + d.Env + "_"
		key = auth.NewKey(prefix)
		now := time.Now().UTC()
		id := "vk_demo_" + auth.Digest(key)[:12]
		if err := settle(d.Engine.Venue(ctx, venueID, keyed("bootstrap-key-"+id, &venuecmd.IssueKey{KeyID: id, Digest: auth.Digest(key),
			Prefix: key[:len(prefix)+4], Env: d.Env, Name: "demo", Scopes: venuecmd.Scopes, ExpiresAt: now.AddDate(1, 0, 0), Now: now, By: owner}))); err != nil {
			return false, err
		}
		changed = true
	}
	creds.Extra["venueKey"], creds.Extra["ownerSession"] = key, session
	return changed, nil
}

// settleOnce is how the bootstrap settles a write it makes on every start: a
// replay of its key means an earlier start made it; otherwise the read
// models must show it.
func settleOnce(ctx context.Context, d *api.Deps) func(engine.Result, error) error {
	return func(res engine.Result, err error) error {
		var replay *commands.Replay
		if errors.As(err, &replay) {
			return nil // made on an earlier start
		}
		if err != nil {
			return err
		}
		return d.Settle(ctx, res)
	}
}

// keyedEnvelope is a bootstrap write keyed by key (its digest too): the
// same write on the next start replays.
func keyedEnvelope(d *api.Deps, sys events.Principal, key string, cmd commands.Command) commands.Envelope {
	env := d.Engine.Envelope(sys, key, cmd)
	env.Digest = key
	return env
}
