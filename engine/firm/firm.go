// Package firm is the aggregate of a firm: its webhook endpoints
// and its Connect pre-registrations, with the record of the Idempotency-Keys
// its venue-door writes answered (engine/idem). Balance, halt and
// reconciliation state live on each account's own aggregate (engine/account).
package firm

import (
	"fmt"
	"sort"
	"time"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/engine/idem"
	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
)

// RegistrationLifetime is how long an unused pre-registration stays linkable.
const RegistrationLifetime = 30 * 24 * time.Hour

// Registration statuses.
const (
	StatusPending = "pending"
	StatusLinked  = "linked"
	StatusRevoked = "revoked"
	StatusExpired = "expired"
)

// Webhook is one registered endpoint.
type Webhook struct {
	ID         string
	URL        string
	EventTypes []string
	CreatedAt  time.Time
	Removed    bool
}

// Registration is one pre-registration.
type Registration struct {
	ID            string
	Email         string
	AccountNumber string
	LoginName     string
	Provider      string
	ExpiresAt     time.Time
	Revoked       bool
	LinkedAt      *time.Time
	TraderID      string
}

// Status is the registration's status at time at.
func (r *Registration) Status(at time.Time) string {
	switch {
	case r.LinkedAt != nil:
		return StatusLinked
	case r.Revoked:
		return StatusRevoked
	case !at.Before(r.ExpiresAt):
		return StatusExpired
	}
	return StatusPending
}

// RegistrationKey is what makes two pre-registrations the same one.
func RegistrationKey(email, provider, accountNumber string) string {
	return email + "\x00" + provider + "\x00" + accountNumber
}

// State is a firm as its commits leave it.
// Firm state is owned by its mailbox goroutine; never touch it from another.
type State struct {
	ID            string
	Webhooks      map[string]*Webhook
	Registrations map[string]*Registration
	ByKey         map[string]string // registration key -> the newest registration's id
	Idem          idem.Record       // Idempotency-Keys of the venue door's webhook writes
}

// New is the state of a firm with no commits.
func New(id string) *State {
	return &State{ID: id, Webhooks: map[string]*Webhook{}, Registrations: map[string]*Registration{}, ByKey: map[string]string{}, Idem: idem.Record{}}
}

// Active lists the endpoints not removed, oldest first.
func (s *State) Active() []*Webhook {
	var out []*Webhook
	for _, w := range s.Webhooks {
		if !w.Removed {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Apply folds one event into the state.
func Apply(s *State, e events.Event) *State {
	switch e := e.(type) {
	case evfirm.WebhookRegistered:
		// Never nil: MessagePack reads an empty list back as nil, JSON as [].
		types := append([]string{}, e.EventTypes...)
		s.Webhooks[e.WebhookID] = &Webhook{ID: e.WebhookID, URL: e.URL, EventTypes: types, CreatedAt: e.At}
	case evfirm.WebhookRemoved:
		if w, ok := s.Webhooks[e.WebhookID]; ok {
			w.Removed = true
		}
	case evfirm.RegistrationCreated:
		r := &Registration{ID: e.RegistrationID, Email: e.Email, AccountNumber: e.AccountNumber,
			LoginName: e.LoginName, Provider: e.Provider, ExpiresAt: e.ExpiresAt}
		s.Registrations[r.ID] = r
		s.ByKey[RegistrationKey(r.Email, r.Provider, r.AccountNumber)] = r.ID
	case evfirm.RegistrationRefreshed:
		if r, ok := s.Registrations[e.RegistrationID]; ok {
			r.ExpiresAt = e.ExpiresAt
		}
	case evfirm.RegistrationRevoked:
		if r, ok := s.Registrations[e.RegistrationID]; ok {
			r.Revoked = true
		}
	case evfirm.RegistrationLinked:
		if r, ok := s.Registrations[e.RegistrationID]; ok {
			at := e.At
			r.LinkedAt, r.TraderID = &at, e.TraderID
		}
	default:
		s.Idem.Apply(e)
	}
	return s
}

func notFound(what string) error {
	return commands.Refuse(commands.CodeNotFound, what+" not found", nil)
}

// keyed reports whether env came through the venue door: an Idempotency-Key
// with its request's digest. The partner routes send no digest.
func keyed(env commands.Envelope) bool { return env.Key != "" && env.Digest != "" }

// view is an endpoint as the webhook routes answer it (never its secret).
func view(w *Webhook) map[string]any {
	return map[string]any{"id": w.ID, "url": w.URL, "eventTypes": w.EventTypes, "createdAt": w.CreatedAt}
}

func registerWebhook(s *State, env commands.Envelope, c *firmcmd.RegisterWebhook) ([]events.Event, error) {
	if w, ok := s.Webhooks[c.ID]; ok && !w.Removed {
		return nil, nil
	}
	for _, w := range s.Active() {
		if w.URL == c.URL {
			return nil, commands.Refuse(commands.CodeWebhookExists,
				"an endpoint with that url is registered already; remove it first", map[string]any{"webhookId": w.ID})
		}
	}
	if len(s.Active()) >= firmcmd.MaxWebhooks {
		return nil, commands.Refuse(commands.CodeWebhookLimitReached,
			fmt.Sprintf("a firm registers at most %d endpoints; remove one first", firmcmd.MaxWebhooks),
			map[string]any{"limit": firmcmd.MaxWebhooks})
	}
	types := append([]string{}, c.EventTypes...)
	return []events.Event{evfirm.WebhookRegistered{WebhookID: c.ID, URL: c.URL, EventTypes: types, At: env.At}}, nil
}

// Decide runs one firm command. Through the venue door (keyed) the webhook
// writes go through idem.Write: the Idempotency-Key and the answer are
// recorded in the write's commit, and a repeat answers it again; the partner
// routes' writes record no key and answer from the read models.
func Decide(s *State, env commands.Envelope) ([]events.Event, error) {
	switch c := env.Cmd.(type) {
	case *firmcmd.RegisterWebhook:
		if !keyed(env) {
			return registerWebhook(s, env, c)
		}
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			evs, err := registerWebhook(s, env, c)
			if err != nil {
				return nil, 0, nil, err
			}
			w := s.Webhooks[c.ID]
			if len(evs) > 0 {
				w = &Webhook{ID: c.ID, URL: c.URL, EventTypes: append([]string{}, c.EventTypes...), CreatedAt: env.At}
			}
			return evs, commands.Done, map[string]any{"webhook": view(w)}, nil
		})
	case *firmcmd.RemoveWebhook:
		w, ok := s.Webhooks[c.ID]
		if !keyed(env) {
			switch {
			case !ok:
				return nil, notFound("webhook")
			case w.Removed:
				return nil, nil
			}
			return []events.Event{evfirm.WebhookRemoved{WebhookID: c.ID, At: env.At}}, nil
		}
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			if !ok || w.Removed { // a removed endpoint is not found, as the partner route answers it
				return nil, 0, nil, notFound("webhook")
			}
			return []events.Event{evfirm.WebhookRemoved{WebhookID: c.ID, At: env.At}}, commands.Done, map[string]any{"webhook": view(w)}, nil
		})
	case *firmcmd.TestWebhook:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			if w, ok := s.Webhooks[c.WebhookID]; !ok || w.Removed {
				return nil, 0, nil, notFound("webhook")
			}
			return nil, commands.Done, map[string]any{"delivery": c.Outcome}, nil
		})
	case *firmcmd.CreateRegistration:
		expires := env.At.Add(RegistrationLifetime)
		if id, ok := s.ByKey[RegistrationKey(c.Email, c.Provider, c.AccountNumber)]; ok {
			r := s.Registrations[id]
			switch r.Status(env.At) {
			case StatusPending, StatusExpired:
				return []events.Event{evfirm.RegistrationRefreshed{RegistrationID: id, ExpiresAt: expires, At: env.At}}, nil
			case StatusLinked:
				return nil, nil
			}
		}
		return []events.Event{evfirm.RegistrationCreated{RegistrationID: c.ID, Email: c.Email, AccountNumber: c.AccountNumber,
			LoginName: c.LoginName, Provider: c.Provider, ExpiresAt: expires, At: env.At}}, nil
	case *firmcmd.RevokeRegistration:
		r, ok := s.Registrations[c.ID]
		if !ok {
			return nil, notFound("registration")
		}
		switch r.Status(env.At) {
		case StatusRevoked:
			return nil, nil
		case StatusLinked:
			return nil, commands.Refuse(commands.CodeRegistrationLinked,
				"the registration was already linked; only an unused one can be revoked", nil)
		}
		return []events.Event{evfirm.RegistrationRevoked{RegistrationID: c.ID, At: env.At}}, nil
	case *firmcmd.LinkRegistration:
		r, ok := s.Registrations[c.ID]
		if !ok || r.Email != c.Email {
			return nil, notFound("registration")
		}
		if !c.Verified {
			return nil, commands.Refuse(commands.CodeEmailUnverified, "verify your email address first: a registration is matched on a verified address", nil)
		}
		switch r.Status(env.At) {
		case StatusLinked:
			if r.TraderID == c.TraderID {
				return nil, nil
			}
			return nil, commands.Refuse(commands.CodeRegistrationLinked, "the registration was already linked", nil)
		case StatusRevoked:
			return nil, commands.Refuse(commands.CodeRegistrationRevoked, "the firm revoked the registration", nil)
		case StatusExpired:
			return nil, commands.Refuse(commands.CodeRegistrationExpired, "the registration expired; ask the firm to send it again", nil)
		}
		return []events.Event{evfirm.RegistrationLinked{RegistrationID: c.ID, TraderID: c.TraderID, At: env.At}}, nil
	}
	return nil, fmt.Errorf("firm: no decision for %T", env.Cmd)
}
