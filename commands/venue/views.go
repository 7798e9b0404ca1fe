package venue

import (
	"time"

	"github.com/svc/engine/events"
	evvenue "github.com/svc/engine/events/venue"
)

// KeyView is a venue key as answered: never its secret or digest.
type KeyView struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Prefix      string    `json:"prefix"`
	Environment string    `json:"environment"`
	Scopes      []string  `json:"scopes"`
	CreatedBy   string    `json:"createdBy"`
	ExpiresAt   time.Time `json:"expiresAt"`
	CreatedAt   time.Time `json:"createdAt"`
	Revoked     bool      `json:"revoked"`
}

// ViewOf is the answer's view of an issued key.
func ViewOf(k evvenue.KeyIssued, revoked bool) KeyView {
	return KeyView{ID: k.KeyID, Name: k.Name, Prefix: k.Prefix, Environment: k.Env, Scopes: k.Scopes, CreatedBy: k.CreatedBy,
		ExpiresAt: k.ExpiresAt.UTC(), CreatedAt: k.At.UTC(), Revoked: revoked}
}

// VenueView is a venue as answered.
func VenueView(id string, e evvenue.Created) map[string]any {
	return map[string]any{"id": id, "orgId": e.OrgID, "name": e.Name, "createdBy": e.CreatedBy, "createdAt": e.At.UTC()}
}

// ProviderView is a provider version as answered: the spec's fields, the manifest as JSON.
func ProviderView(p evvenue.Provider) map[string]any {
	return map[string]any{"id": p.ID, "venueId": p.VenueID, "name": p.Name, "manifest": rawJSON(p.Manifest),
		"manifestHash": p.ManifestHash, "state": p.State, "creationKey": p.CreationKey, "creationHash": p.CreationHash,
		"createdAt": p.CreatedAt.UTC()}
}

type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// AccountView is an account a venue issued, as its answers show it.
func AccountView(accountID, number, label, groupID, currency string, starting, balance, commissions events.Decimal, created time.Time) map[string]any {
	return map[string]any{"accountId": accountID, "accountNumber": number, "label": label, "groupId": groupID,
		"currency": currency, "startingBalance": starting, "balance": balance, "commissions": commissions,
		"createdAt": created.UTC()}
}
