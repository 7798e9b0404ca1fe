package venue

import (
	"errors"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
	"github.com/svc/engine/projections"
)

// ownPolicy refuses a policy id another venue stated first (409 risk_policy_owner_conflict).
func (h *Handlers) ownPolicy(r *http.Request, policyID string) error {
	owner, err := projections.GetInto[string](r.Context(), h.d.Store, projections.CollPolicyOwner, policyID)
	switch {
	case errors.Is(err, projections.ErrNotFound):
		return nil
	case err != nil:
		return err
	case owner != DoorOf(r).Venue.VenueID:
		return commands.Refuse(commands.CodeRiskPolicyOwnerConflict, "the policy id belongs to another venue",
			map[string]any{"field": "policyId"})
	}
	return nil
}

// StatePolicy states one version of a risk policy (PUT
// .../risk-policies/{policyId}/versions/{version}); a stated version never changes.
func (h *Handlers) StatePolicy(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	var body map[string]any
	if err := httpx.Decode(r, &body, 0); err != nil {
		return nil, err
	}
	c := &venuecmd.StatePolicy{PolicyID: mux.Vars(r)["policyId"], Version: mux.Vars(r)["version"], Body: idem.Body(r)}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := h.ownPolicy(r, c.PolicyID); err != nil {
		return nil, err
	}
	return h.exec(r, DoorOf(r).Venue.VenueID, c)
}

// PublishPolicy puts a stated version in force (POST .../risk-policies/{policyId}/publish {version}).
func (h *Handlers) PublishPolicy(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	c := &venuecmd.PublishPolicy{}
	if err := httpx.Decode(r, c, 0); err != nil {
		return nil, err
	}
	c.PolicyID = mux.Vars(r)["policyId"]
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := h.ownPolicy(r, c.PolicyID); err != nil {
		return nil, err
	}
	return h.exec(r, DoorOf(r).Venue.VenueID, c)
}

// GetPolicy answers a policy's versions and the one in force; an unstated policy is 404.
func (h *Handlers) GetPolicy(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["policyId"]
	v, found, err := h.d.Engine.VenuePolicy(r.Context(), DoorOf(r).Venue.VenueID, id)
	if err != nil {
		return err
	}
	if !found {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "this venue has stated no such risk policy")
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"policy": v})
	return nil
}
