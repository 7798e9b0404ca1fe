package identity

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	orgcmd "github.com/svc/engine/commands/org"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// orgView is an organization as its member sees it.
type orgView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
}

// actor is the signed-in user a command acts for.
func (h *Handlers) actor(r *http.Request) (orgcmd.Actor, error) {
	p, _ := httpx.PrincipalOf(r)
	u, err := h.user(r.Context(), p.UserID)
	if err != nil {
		return orgcmd.Actor{}, err
	}
	return orgcmd.Actor{UserID: u.UserID, Email: u.Email, Verified: u.EmailVerified}, nil
}

// orgCmd runs cmd on the organization and waits for the read models.
func (h *Handlers) orgCmd(r *http.Request, orgID string, cmd commands.Command) error {
	p, _ := httpx.PrincipalOf(r)
	res, err := h.d.Engine.Org(r.Context(), orgID, h.d.Engine.Envelope(p.Principal, r.Header.Get("Idempotency-Key"), cmd))
	if err != nil {
		return err
	}
	return h.d.Settle(r.Context(), res)
}

func (h *Handlers) orgOf(r *http.Request, orgID, userID string) (orgView, error) {
	o, err := projections.GetInto[projections.Org](r.Context(), h.d.Store, projections.CollOrg, orgID)
	if err != nil {
		return orgView{}, err
	}
	role, err := projections.GetInto[string](r.Context(), h.d.Store, projections.CollUserOrg, userID+"/"+orgID)
	if err != nil {
		return orgView{}, err
	}
	return orgView{ID: o.OrgID, Name: o.Name, Role: role, CreatedAt: o.CreatedAt.UTC()}, nil
}

// orgID is the {id} of the path when it names an organization the caller
// belongs to; anything else is 404, so ids of others' organizations say nothing.
func (h *Handlers) orgID(r *http.Request) (string, error) {
	p, _ := httpx.PrincipalOf(r)
	id := mux.Vars(r)["id"]
	if len(id) <= 64 {
		_, err := projections.GetInto[string](r.Context(), h.d.Store, projections.CollUserOrg, p.UserID+"/"+id)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, projections.ErrNotFound) {
			return "", err
		}
	}
	return "", httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no organization of yours has that id")
}

// CreateOrg creates an organization whose owner is the caller (a verified
// user). An Idempotency-Key makes a retry answer the same organization.
func (h *Handlers) CreateOrg(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Name string `json:"name"`
	}
	if err := httpx.Decode(r, &b, 0); err != nil {
		return err
	}
	by, err := h.actor(r)
	if err != nil {
		return err
	}
	id, digest, err := api.IdempotentID(r, "org_", by.UserID, b.Name)
	if err != nil {
		return err
	}
	if err := h.orgRoom(r, by.UserID, id); err != nil {
		return err
	}
	if err := h.orgCmd(r, id, &orgcmd.Create{Name: b.Name, By: by, Digest: digest}); err != nil {
		return err
	}
	v, err := h.orgOf(r, id, by.UserID)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, map[string]any{"organization": v})
	return nil
}

// orgRoom refuses a new organization to a user already in
// orgcmd.MaxOrganizations; a retry of one they made (id) is no new one.
// The count is the read model's, which every creation waits for.
func (h *Handlers) orgRoom(r *http.Request, userID, id string) error {
	n, mine := 0, false
	err := h.d.Store.List(r.Context(), projections.CollUserOrg, projections.Query{Prefix: userID + "/"}, func(key string, _ func(any) error) error {
		n++
		mine = mine || key == userID+"/"+id
		return nil
	})
	if err != nil || mine || n < orgcmd.MaxOrganizations {
		return err
	}
	return &httpx.Error{Status: http.StatusConflict, Code: commands.CodeOrganizationLimitReached, Params: map[string]any{"max": orgcmd.MaxOrganizations},
		Msg: fmt.Sprintf("you belong to %d organizations: a user in that many makes no more", orgcmd.MaxOrganizations)}
}

// ListOrgs lists the caller's organizations with their role in each.
func (h *Handlers) ListOrgs(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	out := []orgView{}
	err := h.d.Store.List(r.Context(), projections.CollUserOrg, projections.Query{Prefix: p.UserID + "/"}, func(key string, _ func(any) error) error {
		v, err := h.orgOf(r, strings.TrimPrefix(key, p.UserID+"/"), p.UserID)
		if err == nil {
			out = append(out, v)
		}
		return err
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"organizations": out})
	return nil
}

// Members lists an organization's members and pending invitations (any member).
func (h *Handlers) Members(w http.ResponseWriter, r *http.Request) error {
	id, err := h.orgID(r)
	if err != nil {
		return err
	}
	members, err := projections.ListInto[projections.OrgMember](r.Context(), h.d.Store, projections.CollOrgMember, projections.Query{Prefix: id + "/"})
	if err != nil {
		return err
	}
	invites, err := projections.ListInto[projections.OrgInvite](r.Context(), h.d.Store, projections.CollOrgInvite, projections.Query{Prefix: id + "/"})
	if err != nil {
		return err
	}
	if invites == nil {
		invites = []projections.OrgInvite{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"members": members, "invitations": invites})
	return nil
}

// Invite invites an address with a role (an owner) and mails it.
func (h *Handlers) Invite(w http.ResponseWriter, r *http.Request) error {
	id, err := h.orgID(r)
	if err != nil {
		return err
	}
	var b struct {
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	if err := httpx.Decode(r, &b, 0); err != nil {
		return err
	}
	by, err := h.actor(r)
	if err != nil {
		return err
	}
	if err := h.orgCmd(r, id, &orgcmd.Invite{Email: b.Email, Role: b.Role, By: by}); err != nil {
		return err
	}
	inv, err := projections.GetInto[projections.OrgInvite](r.Context(), h.d.Store, projections.CollOrgInvite, id+"/"+strings.ToLower(b.Email))
	if err != nil {
		return err
	}
	o, _ := h.orgOf(r, id, by.UserID)
	h.mail(r.Context(), inv.Email, "You are invited to "+o.Name,
		by.Email+" invites you to the organization "+o.Name+" as "+inv.Role+".\n\n"+
			"Sign in with this address (sign up first if you have no account), then accept: POST /api/organizations/"+id+"/invitations/accept\n")
	httpx.WriteJSON(w, http.StatusCreated, map[string]any{"invitation": inv})
	return nil
}

// Accept joins the caller to an organization whose invitation names their
// verified address. The organization is not theirs yet, so its id is taken as given.
func (h *Handlers) Accept(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["id"]
	if len(id) > 64 {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no invitation of that organization names your address")
	}
	by, err := h.actor(r)
	if err != nil {
		return err
	}
	if err := h.orgCmd(r, id, &orgcmd.Accept{By: by}); err != nil {
		return err
	}
	v, err := h.orgOf(r, id, by.UserID)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"organization": v})
	return nil
}

// RemoveMember removes a member (an owner), or the caller themselves; the
// last owner stays (409 last_owner).
func (h *Handlers) RemoveMember(w http.ResponseWriter, r *http.Request) error {
	id, err := h.orgID(r)
	if err != nil {
		return err
	}
	by, err := h.actor(r)
	if err != nil {
		return err
	}
	if err := h.orgCmd(r, id, &orgcmd.Remove{UserID: mux.Vars(r)["userId"], By: by}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
