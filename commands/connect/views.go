package connect

import (
	"time"

	evconnect "github.com/svc/engine/events/connect"
)

// LinkView is the spec's ConnectLink: exactly id, state, trader, result,
// expiresAt, createdAt and updatedAt. A link whose token expired before a
// connection reads as failed from expiresAt on, whether or not a later
// command has recorded it yet.
type LinkView struct {
	ID        string         `json:"id"`
	State     string         `json:"state"`
	Trader    string         `json:"trader"`
	Result    map[string]any `json:"result"`
	ExpiresAt time.Time      `json:"expiresAt"`
	CreatedAt time.Time      `json:"createdAt"`
	UpdatedAt time.Time      `json:"updatedAt"`
}

// ViewLink is the link as answered at now.
func ViewLink(l evconnect.Link, now time.Time) LinkView {
	v := LinkView{ID: l.ID, State: l.State, Trader: l.Trader, ExpiresAt: l.ExpiresAt.UTC(), CreatedAt: l.CreatedAt.UTC(), UpdatedAt: l.UpdatedAt.UTC()}
	if l.Expired(now) {
		v.State, l.Reason = evconnect.StateFailed, "expired"
		v.UpdatedAt = l.ExpiresAt.UTC()
	}
	if l.Disconnected {
		v.Result = map[string]any{"status": "disconnected", "accountId": l.AccountID}
		return v
	}
	switch v.State {
	case evconnect.StateConnected:
		v.Result = map[string]any{"status": evconnect.StateConnected, "accountId": l.AccountID}
	case evconnect.StateClosed:
		v.Result = map[string]any{"status": evconnect.StateClosed}
	case evconnect.StateFailed:
		v.Result = map[string]any{"status": evconnect.StateFailed, "reason": l.Reason}
	}
	return v
}

// KeyView is an app key as answered: never its secret or digest.
type KeyView struct {
	ID          string    `json:"id"`
	AppID       string    `json:"appId"`
	Name        string    `json:"name"`
	Prefix      string    `json:"prefix"`
	Environment string    `json:"environment"`
	CreatedBy   string    `json:"createdBy"`
	ExpiresAt   time.Time `json:"expiresAt"`
	CreatedAt   time.Time `json:"createdAt"`
	Revoked     bool      `json:"revoked"`
}

// ViewKey is the answer's view of an issued key.
func ViewKey(appID string, k evconnect.KeyIssued, revoked bool) KeyView {
	return KeyView{ID: k.KeyID, AppID: appID, Name: k.Name, Prefix: k.Prefix, Environment: k.Env, CreatedBy: k.CreatedBy,
		ExpiresAt: k.ExpiresAt.UTC(), CreatedAt: k.At.UTC(), Revoked: revoked}
}

// AppView is an app as answered.
type AppView struct {
	ID          string               `json:"id"`
	OrgID       string               `json:"orgId"`
	Name        string               `json:"name"`
	LogoURL     *string              `json:"logoUrl"`
	Websites    []string             `json:"websites"`
	WhiteLabel  evconnect.WhiteLabel `json:"whiteLabel"`
	Environment string               `json:"environment"`
	Counterpart *string              `json:"productionAppId"`
	CreatedBy   string               `json:"createdBy"`
	CreatedAt   time.Time            `json:"createdAt"`
	UpdatedAt   time.Time            `json:"updatedAt"`
}

// ViewApp is the answer's view of an app.
func ViewApp(id string, c evconnect.AppCreated, s evconnect.Settings, updated time.Time) AppView {
	v := AppView{ID: id, OrgID: c.OrgID, Name: s.Name, Websites: s.Websites, WhiteLabel: s.WhiteLabel, Environment: c.Env,
		CreatedBy: c.CreatedBy, CreatedAt: c.At.UTC(), UpdatedAt: updated.UTC()}
	if s.LogoURL != "" {
		v.LogoURL = &s.LogoURL
	}
	if c.Counterpart != "" {
		v.Counterpart = &c.Counterpart
	}
	if v.Websites == nil {
		v.Websites = []string{}
	}
	return v
}
