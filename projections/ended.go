package projections

import (
	"github.com/svc/engine/events"
	evconnect "github.com/svc/engine/events/connect"
	evtenant "github.com/svc/engine/events/tenant"
	evvenue "github.com/svc/engine/events/venue"
)

// Ended is a credential a commit ends: a key revoked or a session ended.
type Ended struct {
	KeyID     string // a Trading API, partner, venue or Connect app key's id; "" for a session
	SessionID string // a trader's or a Connect dashboard's session id; "" for a key
	Reason    string // "revoked" for a key; a session's reason (logout, password_reset, ...)
}

// EndedBy lists the credentials c ends. Every node's projector hears every
// commit, so a listener that ends what a credential holds open (its streams,
// gateway/auth) ends it on every node, whichever node took the revocation.
func EndedBy(c events.Committed) []Ended {
	var out []Ended
	for _, e := range c.Events {
		switch e := e.(type) {
		case evtenant.KeyRevoked:
			out = append(out, Ended{KeyID: e.KeyID, Reason: "revoked"})
		case evvenue.KeyRevoked:
			out = append(out, Ended{KeyID: e.KeyID, Reason: "revoked"})
		case evconnect.KeyRevoked:
			out = append(out, Ended{KeyID: e.KeyID, Reason: "revoked"})
		case evtenant.SessionEnded:
			out = append(out, Ended{SessionID: e.SessionID, Reason: e.Reason})
		}
	}
	return out
}
