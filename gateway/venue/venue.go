// Package venue serves the venue platform's doors: /api/venues/ and
// /api/partner/venues/{venueId}/ for machines with a venue key, and their
// twins under /api/back-office/ for a venue's verified owners signed in.
// Both doors resolve the same venue context and run the same handlers and
// commands; every write takes an Idempotency-Key (gateway/idem).
package venue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	orgcmd "github.com/svc/engine/commands/org"
	tenantcmd "github.com/svc/engine/commands/tenant"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
	evvenue "github.com/svc/engine/events/venue"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
	"github.com/svc/engine/projections"
)

// Fam is the error shape of every venue route: the code itself in error.
const Fam = httpx.Venue

// Handlers serve the venue routes; the route table is gateway/routes.go.
type Handlers struct {
	d   *api.Deps
	now func() time.Time
}

// New makes the venue handlers.
func New(d *api.Deps, now func() time.Time) *Handlers {
	if now == nil {
		now = time.Now
	}
	return &Handlers{d: d, now: now}
}

// Serve adapts a read handler to the venue error shape.
func Serve(h httpx.Handler) http.Handler { return httpx.Serve(Fam, h) }

type ctxKey struct{}

// Door is who came through which door to which venue.
type Door struct {
	Venue projections.Venue
	Owner *venuecmd.Owner // the signed-in owner (back office); nil for a venue key
}

// DoorOf is the request's resolved venue door.
func DoorOf(r *http.Request) Door {
	d, _ := r.Context().Value(ctxKey{}).(Door)
	return d
}

func notFound() error {
	return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no venue of yours has that id")
}

func (h *Handlers) venue(ctx context.Context, id string) (projections.Venue, error) {
	if len(id) > 64 {
		return projections.Venue{}, notFound()
	}
	v, err := projections.GetInto[projections.Venue](ctx, h.d.Store, projections.CollVenue, id)
	if errors.Is(err, projections.ErrNotFound) {
		return v, notFound()
	}
	return v, err
}

// role is the user's role in the organization now ("" when not a member).
func (h *Handlers) role(ctx context.Context, orgID, userID string) (string, error) {
	return h.d.OrgRole(ctx, orgID, userID)
}

// KeyDoor admits a venue key (after auth.RequireVenueKey) to the path's
// venue when it is the key's own (else 404), the key has one of scopes
// (else 403 permission_denied, params.scopes) and the owner who issued it
// is an owner of the venue's organization still (else 403, params.reason
// creator_not_owner).
func (h *Handlers) KeyDoor(scopes ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, _ := httpx.PrincipalOf(r)
			fail := func(err error) { httpx.WriteError(w, r, Fam, err) }
			if p.Venue == nil || p.Venue.VenueID != mux.Vars(r)["venueId"] {
				fail(notFound())
				return
			}
			v, err := h.venue(r.Context(), p.Venue.VenueID)
			if err != nil {
				fail(err)
				return
			}
			if !slices.ContainsFunc(scopes, func(s string) bool { return slices.Contains(p.Venue.Scopes, s) }) {
				fail(&httpx.Error{Status: http.StatusForbidden, Code: commands.CodePermissionDenied, Params: map[string]any{"scopes": scopes},
					Msg: "the venue key lacks the scope this route needs: one of " + strings.Join(scopes, ", ")})
				return
			}
			role, err := h.role(r.Context(), v.OrgID, p.Venue.CreatedBy)
			if err != nil {
				fail(err)
				return
			}
			if role != "owner" {
				fail(&httpx.Error{Status: http.StatusForbidden, Code: commands.CodePermissionDenied, Params: map[string]any{"reason": "creator_not_owner"},
					Msg: "the owner who issued this key is no longer an owner of the venue's organization: it stopped working"})
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, Door{Venue: v})))
		})
	}
}

// OwnerDoor admits a signed-in user (after auth.RequireSession) to the
// path's venue when they are an owner of its organization: 404 when they
// are not a member, 403 permission_denied when a member but not an owner.
func (h *Handlers) OwnerDoor(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := func(err error) { httpx.WriteError(w, r, Fam, err) }
		v, err := h.venue(r.Context(), mux.Vars(r)["venueId"])
		if err != nil {
			fail(err)
			return
		}
		by, err := h.owner(r, v.OrgID)
		if err != nil {
			fail(err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, Door{Venue: v, Owner: &by})))
	})
}

// owner reads the signed-in user's standing in the organization.
func (h *Handlers) owner(r *http.Request, orgID string) (venuecmd.Owner, error) {
	p, _ := httpx.PrincipalOf(r)
	role, err := h.role(r.Context(), orgID, p.UserID)
	switch {
	case err != nil:
		return venuecmd.Owner{}, err
	case role == "":
		return venuecmd.Owner{}, notFound()
	case role != "owner":
		return venuecmd.Owner{}, httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "only an owner of the venue's organization manages it")
	}
	u, err := projections.GetInto[projections.User](r.Context(), h.d.Store, projections.CollUser, p.UserID)
	if err != nil {
		return venuecmd.Owner{}, err
	}
	return venuecmd.Owner{UserID: p.UserID, Verified: u.EmailVerified, Owner: true}, nil
}

// exec runs a keyed venue command and waits for the read models.
func (h *Handlers) exec(r *http.Request, venueID string, cmd commands.Command) ([]events.Event, error) {
	env := idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), "", cmd))
	res, err := h.d.Engine.Venue(r.Context(), venueID, env)
	if err != nil {
		return nil, err
	}
	return res.Events, h.d.Settle(r.Context(), res)
}

// CreateVenue makes a venue of one of the caller's organizations (POST
// /api/back-office/venues). The venue's id derives from the caller and the
// Idempotency-Key, so a retry reaches the same venue and gets its first answer.
func (h *Handlers) CreateVenue(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	if h.d.Env == "production" {
		return nil, httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied,
			"production venues are arranged when a venue qualifies: the operator creates them (engine admin create-venue)")
	}
	var c venuecmd.CreateVenue
	if err := httpx.Decode(r, &c, 0); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	p, _ := httpx.PrincipalOf(r)
	by, err := h.owner(r, c.OrgID)
	if err != nil {
		return nil, err
	}
	if !by.Verified {
		return nil, httpx.Errorf(http.StatusForbidden, commands.CodeEmailUnverified, "verify your email before creating a venue")
	}
	sum := sha256.Sum256([]byte(p.UserID + "\x00" + idem.Key(r)))
	c.FirmTenantID, c.By = "firm_"+hex.EncodeToString(sum[:12]), by
	venueID := evfirm.VenueID(c.FirmTenantID)
	// At most orgcmd.MaxVenues per organization; a retry of one made is no new one.
	if ids, err := projections.ListInto[string](r.Context(), h.d.Store, projections.CollOrgVenue, projections.Query{Prefix: c.OrgID + "/"}); err != nil {
		return nil, err
	} else if len(ids) >= orgcmd.MaxVenues && !slices.Contains(ids, venueID) {
		return nil, &httpx.Error{Status: http.StatusConflict, Code: commands.CodeVenueLimitReached, Params: map[string]any{"max": orgcmd.MaxVenues},
			Msg: fmt.Sprintf("the organization has %d venues, the most it may have", orgcmd.MaxVenues)}
	}
	// The tenant that holds the venue's accounts, balances and webhooks (the firm routes' tenant).
	sys := events.Principal{System: "venue", UserID: p.UserID}
	res, err := h.d.Engine.Tenant(r.Context(), c.FirmTenantID, h.d.Engine.Envelope(sys, "", &tenantcmd.CreateTenant{Name: c.Name, Kind: "firm"}))
	if err != nil {
		return nil, err
	}
	if err := h.d.Settle(r.Context(), res); err != nil {
		return nil, err
	}
	return h.exec(r, venueID, &c)
}

// ListVenues lists the venues of the organizations the caller owns (GET /api/back-office/venues).
func (h *Handlers) ListVenues(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	out := []map[string]any{}
	err := h.d.Store.List(r.Context(), projections.CollUserOrg, projections.Query{Prefix: p.UserID + "/"}, func(key string, get func(any) error) error {
		var role string
		if err := get(&role); err != nil || role != "owner" {
			return err
		}
		org := strings.TrimPrefix(key, p.UserID+"/")
		ids, err := projections.ListInto[string](r.Context(), h.d.Store, projections.CollOrgVenue, projections.Query{Prefix: org + "/"})
		if err != nil {
			return err
		}
		for _, id := range ids {
			v, err := h.venue(r.Context(), id)
			if err != nil {
				return err
			}
			out = append(out, view(v))
		}
		return nil
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"venues": out})
	return nil
}

func view(v projections.Venue) map[string]any {
	return venuecmd.VenueView(v.VenueID, evvenue.Created{OrgID: v.OrgID, Name: v.Name, CreatedBy: v.CreatedBy, At: v.CreatedAt})
}

// GetVenue answers the door's venue.
func (h *Handlers) GetVenue(w http.ResponseWriter, r *http.Request) error {
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"venue": view(DoorOf(r).Venue)})
	return nil
}

// IssueKey issues a venue key (owner session only). The first answer shows
// the secret, once; a retry with the same key answers the key without it
// (the engine keeps only its digest).
func (h *Handlers) IssueKey(w http.ResponseWriter, r *http.Request) error {
	door := DoorOf(r)
	c := venuecmd.IssueKey{Now: h.now(), Env: h.d.Env, By: *door.Owner}
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	c.Now, c.Env, c.By = h.now(), h.d.Env, *door.Owner
	secret := auth.NewKey("svc_vk_" + c.Env + "_")
	c.KeyID, c.Digest, c.Prefix = "vk_"+ulid.Make().String(), auth.Digest(secret), secret[:len("svc_vk_"+c.Env+"_")+4]
	evs, err := h.exec(r, door.Venue.VenueID, &c)
	return idem.WriteAdding(w, evs, err, nil, map[string]any{"secret": secret})
}

// ListKeys lists the venue's keys, live and revoked, never their secrets.
func (h *Handlers) ListKeys(w http.ResponseWriter, r *http.Request) error {
	v := DoorOf(r).Venue
	digests, err := projections.ListInto[string](r.Context(), h.d.Store, projections.CollVenueKey, projections.Query{Prefix: v.VenueID + "/"})
	if err != nil {
		return err
	}
	out := []venuecmd.KeyView{}
	for _, dg := range digests {
		k, err := projections.GetInto[projections.Key](r.Context(), h.d.Store, projections.CollKey, dg)
		if err != nil {
			return err
		}
		out = append(out, venuecmd.ViewOf(evvenue.KeyIssued{KeyID: k.KeyID, Name: k.Name, Prefix: k.Prefix, Env: k.Env, Scopes: k.Scopes,
			CreatedBy: k.CreatedBy, ExpiresAt: k.ExpiresAt, At: k.CreatedAt}, k.Revoked))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"keys": out})
	return nil
}

// RevokeKey revokes a venue key (owner session only): its next request is 401.
func (h *Handlers) RevokeKey(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	door := DoorOf(r)
	return h.exec(r, door.Venue.VenueID, &venuecmd.RevokeKey{KeyID: mux.Vars(r)["keyId"], By: *door.Owner})
}

// RegisterProvider saves a candidate provider version (POST
// /api/partner/venues/{venueId}/providers and its twins): strictly validated,
// nothing contacted, approved or enabled.
func (h *Handlers) RegisterProvider(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	var c venuecmd.RegisterProvider
	if err := httpx.Decode(r, &c, 0); err != nil {
		return nil, err
	}
	return h.exec(r, DoorOf(r).Venue.VenueID, &c)
}

// ListProviders lists the venue's provider versions, oldest first.
func (h *Handlers) ListProviders(w http.ResponseWriter, r *http.Request) error {
	ps, err := projections.ListInto[evvenue.Provider](r.Context(), h.d.Store, projections.CollProvider, projections.Query{Prefix: DoorOf(r).Venue.VenueID + "/"})
	if err != nil {
		return err
	}
	slices.SortFunc(ps, func(a, b evvenue.Provider) int { return a.CreatedAt.Compare(b.CreatedAt) })
	out := make([]map[string]any, 0, len(ps))
	for _, p := range ps {
		out = append(out, venuecmd.ProviderView(p))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"providers": out})
	return nil
}

// GetProvider answers one provider version.
func (h *Handlers) GetProvider(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["providerId"]
	if len(id) > 64 {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no provider version of this venue has that id")
	}
	p, err := projections.GetInto[evvenue.Provider](r.Context(), h.d.Store, projections.CollProvider, DoorOf(r).Venue.VenueID+"/"+id)
	if errors.Is(err, projections.ErrNotFound) {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no provider version of this venue has that id")
	}
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"provider": venuecmd.ProviderView(p)})
	return nil
}

// TraderHeader names the trader a venue key acts for on trading and account routes.
const TraderHeader = "x-svc-trader"

// ActAsTrader admits a venue key on the trading and account routes when it
// carries trader:trade (else 403), its issuer is an owner still (else 403)
// and it names a trader by email in x-svc-trader (else 400): it then acts on
// the accounts the venue issued to that trader, and no other. Other
// credentials pass untouched.
func (h *Handlers) ActAsTrader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := httpx.PrincipalOf(r)
		if p.Kind != "venue" {
			next.ServeHTTP(w, r)
			return
		}
		fail := func(err error) { httpx.WriteError(w, r, httpx.Trading, err) }
		if p.Venue == nil || !slices.Contains(p.Venue.Scopes, venuecmd.ScopeTraderTrade) {
			fail(httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "a venue key acts for a trader only with the scope trader:trade"))
			return
		}
		v, err := h.venue(r.Context(), p.Venue.VenueID)
		if err != nil {
			fail(err)
			return
		}
		if role, err := h.role(r.Context(), v.OrgID, p.Venue.CreatedBy); err != nil || role != "owner" {
			if err == nil {
				err = httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "the owner who issued this key is no longer an owner of the venue's organization: it stopped working")
			}
			fail(err)
			return
		}
		trader := strings.ToLower(strings.TrimSpace(r.Header.Get(TraderHeader)))
		if commands.Email(TraderHeader, trader) != nil {
			fail(commands.BadField(TraderHeader, nil, "a venue key names the trader it acts for in x-svc-trader: the email the venue issued the accounts to"))
			return
		}
		p.OnBehalfOf = trader
		next.ServeHTTP(w, r.WithContext(httpx.WithPrincipal(r.Context(), p)))
	})
}
