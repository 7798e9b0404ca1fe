// Package challenges serves the challenge routes (issue 18): the active
// programs, a program's authoring by an operator or a venue owner, a
// trader's enrollment and an enrollment's history. Every route takes a
// signed-in session and no key; the area is served only with
// CHALLENGES_ENABLED (otherwise its routes answer 404 like unknown ones).
package challenges

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	challengecmd "github.com/svc/engine/commands/challenge"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/events"
	evch "github.com/svc/engine/events/challenge"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
	"github.com/svc/engine/projections"
	chproj "github.com/svc/engine/projections/challenge"
)

// Config configures the area (nothing yet: it is served or not).
type Config struct{}

// Handlers serve the challenge routes.
type Handlers struct {
	d   *api.Deps
	cfg Config
}

// New makes the handlers.
func New(d *api.Deps, cfg Config) *Handlers { return &Handlers{d: d, cfg: cfg} }

// MaxBody bounds a challenge write's body.
const MaxBody = 16 << 10

// List answers the active programs: {challenges: [...]}, by id; drafts never.
func (h *Handlers) List(w http.ResponseWriter, r *http.Request) error {
	docs, err := projections.ListInto[chproj.Program](r.Context(), h.d.Store, chproj.CollProgram, projections.Query{})
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, p := range docs {
		if p.Program.IsActive {
			out = append(out, challengecmd.View(p.Program))
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"challenges": out})
	return nil
}

// authorBody is a program's authoring body: the program's fields and the
// venue it is authored for.
type authorBody struct {
	VenueID string `json:"venueId"`
	challengecmd.ProgramBody
}

// Author writes a program (PUT /api/challenges/{id}, Idempotency-Key): an
// operator of the venue with account:write, or an owner of the venue's
// organization. 201 with the program when new, 200 when replaced.
func (h *Handlers) Author(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	var b authorBody
	if err := httpx.Decode(r, &b, MaxBody); err != nil {
		return nil, err
	}
	if err := commands.Key("venueId", b.VenueID, 64); err != nil {
		return nil, err
	}
	id := mux.Vars(r)["id"]
	if err := challengecmd.UUID("id", id); err != nil {
		return nil, httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "a program's id is a UUID in canonical lower-case form")
	}
	p, err := b.Program(id)
	if err != nil {
		return nil, err
	}
	pr, _ := httpx.PrincipalOf(r)
	if err := h.mayAuthor(r, b.VenueID, pr.UserID); err != nil {
		return nil, err
	}
	env := idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), "", &challengecmd.PublishProgram{Program: p, VenueID: b.VenueID, By: pr.UserID}))
	res, err := h.d.Engine.PublishProgram(r.Context(), id, env)
	if err != nil {
		return nil, err
	}
	return res.Events, h.d.Settle(r.Context(), res)
}

// mayAuthor admits an operator of the venue with account:write or an owner
// of its organization; an unknown venue is 404, anyone else 403.
func (h *Handlers) mayAuthor(r *http.Request, venueID, userID string) error {
	ctx := r.Context()
	v, err := projections.GetInto[projections.Venue](ctx, h.d.Store, projections.CollVenue, venueID)
	if errors.Is(err, projections.ErrNotFound) {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no venue has that id")
	} else if err != nil {
		return err
	}
	op, err := projections.GetInto[projections.Operator](ctx, h.d.Store, projections.CollOperator, venueID+"/"+userID)
	if err == nil && slices.Contains(op.Scopes, "account:write") {
		return nil
	} else if err != nil && !errors.Is(err, projections.ErrNotFound) {
		return err
	}
	m, err := projections.GetInto[projections.OrgMember](ctx, h.d.Store, projections.CollOrgMember, v.OrgID+"/"+userID)
	if err == nil && m.Role == "owner" {
		return nil
	} else if err != nil && !errors.Is(err, projections.ErrNotFound) {
		return err
	}
	return httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "programs are authored by an operator of the venue (account:write) or an owner of its organization")
}

// enrollBody is an enrollment's body.
type enrollBody struct {
	ChallengeID string              `json:"challengeId"`
	AccountSize challengecmd.Number `json:"accountSize"`
	AccountType string              `json:"accountType"`
}

// Enroll enrolls the signed-in trader in an active program's first stage
// (POST /api/enrollments, Idempotency-Key): 201 {enrollment} with the paper
// account issued at the chosen size. A priced program answers 402
// payment_required (this deployment collects no fee), a second enrollment
// while one is in flight 409 enrollment_in_flight.
func (h *Handlers) Enroll(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	var b enrollBody
	if err := httpx.Decode(r, &b, MaxBody); err != nil {
		return nil, err
	}
	if !b.AccountSize.Set {
		return nil, commands.BadField("accountSize", nil, "accountSize is required: a JSON number, one of the program's sizes")
	}
	if b.AccountType == "" {
		b.AccountType = "standard"
	}
	p, _ := httpx.PrincipalOf(r)
	sum := sha256.Sum256([]byte(p.UserID + "\x00" + idem.Key(r)))
	enrollmentID := "enr_" + hex.EncodeToString(sum[:13])
	cmd := &challengecmd.Enroll{EnrollmentID: enrollmentID, AccountID: engine.StageAccountID(enrollmentID, 1),
		ChallengeID: b.ChallengeID, Size: b.AccountSize.Decimal, Type: b.AccountType}
	env := idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), "", cmd))
	res, err := h.d.Engine.Enroll(r.Context(), p.UserID, env)
	var replay *commands.Replay
	if errors.As(err, &replay) && replay.Status == http.StatusCreated {
		// A repeat: the account may not have been issued when the first answer was lost.
		if _, err := h.d.Engine.IssueEvaluation(r.Context(), p.UserID, enrollmentID); err != nil {
			return nil, err
		}
		return nil, replay
	}
	if err != nil {
		return nil, err
	}
	opened, err := h.d.Engine.IssueEvaluation(r.Context(), p.UserID, enrollmentID)
	if err != nil {
		return nil, err
	}
	if err := h.d.Settle(r.Context(), res); err != nil {
		return nil, err
	}
	return res.Events, h.d.Settle(r.Context(), opened)
}

// Events answers an enrollment's history (GET /api/enrollments/events?id=):
// {events: [{status, actor, reason, at}]}, at in Unix seconds. Another
// user's enrollment is 404 like a missing one.
func (h *Handlers) Events(w http.ResponseWriter, r *http.Request) error {
	id := r.URL.Query().Get("id")
	if err := commands.Key("id", id, 64); err != nil {
		return err
	}
	p, _ := httpx.PrincipalOf(r)
	en, err := projections.GetInto[chproj.Enrollment](r.Context(), h.d.Store, chproj.CollEnrollment, id)
	if errors.Is(err, projections.ErrNotFound) || (err == nil && en.UserID != p.UserID) {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no enrollment of yours has that id")
	} else if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(en.Events))
	for _, e := range en.Events {
		var reason any
		if e.Reason != "" {
			reason = e.Reason
		}
		out = append(out, map[string]any{"status": e.Status, "actor": e.Actor, "reason": reason, "at": e.At.Unix()})
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"events": out})
	return nil
}

// Reset restarts a failed enrollment's stage on its account (POST
// /api/enrollments/reset {"enrollmentId"}, Idempotency-Key): the account back
// to its starting balance, the eval_breach lock released, the rules bound
// anew from now; the history records registered (reason reset). A reset is
// bought at the stage's price: a priced stage answers 402 payment_required
// here (no fee is collected). 409 enrollment_not_failed for an enrollment
// that has not failed, enrollment_in_flight while another one is.
func (h *Handlers) Reset(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	var b struct {
		EnrollmentID string `json:"enrollmentId"`
	}
	if err := httpx.Decode(r, &b, MaxBody); err != nil {
		return nil, err
	}
	if err := commands.Key("enrollmentId", b.EnrollmentID, 64); err != nil {
		return nil, err
	}
	p, _ := httpx.PrincipalOf(r)
	env := idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), "", &challengecmd.ResetEnrollment{EnrollmentID: b.EnrollmentID}))
	res, err := h.d.Engine.ResetEnrollment(r.Context(), p.UserID, env)
	var replay *commands.Replay
	if errors.As(err, &replay) {
		var a struct {
			ResetRef string `json:"resetRef"`
		}
		if replay.Status == http.StatusOK && json.Unmarshal(replay.Body, &a) == nil && a.ResetRef != "" {
			// A repeat: the restart may not have happened when the first answer was lost.
			if _, err := h.d.Engine.RestartEvaluation(r.Context(), p.UserID, b.EnrollmentID, a.ResetRef); err != nil {
				return nil, err
			}
		}
		return nil, replay
	}
	if err != nil {
		return nil, err
	}
	ref := ""
	for _, e := range res.Events {
		if s, ok := e.(evch.StatusRecorded); ok {
			ref = s.Ref
		}
	}
	restarted, err := h.d.Engine.RestartEvaluation(r.Context(), p.UserID, b.EnrollmentID, ref)
	if err != nil {
		return nil, err
	}
	if err := h.d.Settle(r.Context(), res); err != nil {
		return nil, err
	}
	return res.Events, h.d.Settle(r.Context(), restarted)
}

// Mine lists the signed-in trader's enrollments (GET /api/enrollments):
// {enrollments: [...]}, oldest first, each as the enroll answer renders it
// with its current stage, account and status.
func (h *Handlers) Mine(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	ids, err := projections.ListInto[string](r.Context(), h.d.Store, chproj.CollUserEnroll, projections.Query{Prefix: p.UserID + "/"})
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, id := range ids {
		en, err := projections.GetInto[chproj.Enrollment](r.Context(), h.d.Store, chproj.CollEnrollment, id)
		if err != nil {
			return err
		}
		out = append(out, challengecmd.EnrollmentView(en.ID, en.ChallengeID, en.Stage, en.AccountID, en.AccountSize, en.AccountType,
			en.Currency, en.Status, en.CreatedAt))
	}
	slices.SortStableFunc(out, func(a, b map[string]any) int {
		return strings.Compare(a["createdAt"].(string), b["createdAt"].(string))
	})
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"enrollments": out})
	return nil
}
