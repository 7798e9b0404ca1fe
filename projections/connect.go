package projections

import (
	"net/url"
	"slices"
	"time"

	"github.com/svc/engine/events"
	evconnect "github.com/svc/engine/events/connect"
)

// Collections of Connect's read models.
const (
	CollApp        = "connect_app"        // by app id
	CollOrgApp     = "org_app"            // orgID/appID -> app id
	CollAppKey     = "app_key"            // appID/keyID -> digest
	CollLink       = "connect_link"       // by link id -> evconnect.Link
	CollAppLink    = "app_link"           // appID/seq/linkID -> link id, in creation order
	CollAppTrader  = "app_trader"         // appID/trader -> AppTrader
	CollTraderLink = "app_trader_link"    // appID/TraderKey(trader)/seq/linkID -> link id, in creation order
	CollAppOrigin  = "connect_app_origin" // counterpart production app id -> sandbox app id
)

// App is a Connect app as read.
type App struct {
	AppID       string             `json:"appId"`
	OrgID       string             `json:"orgId"`
	TenantID    string             `json:"tenantId"`
	Env         string             `json:"environment"`
	Counterpart string             `json:"counterpart,omitempty"`
	Settings    evconnect.Settings `json:"settings"`
	CreatedBy   string             `json:"createdBy"`
	CreatedAt   time.Time          `json:"createdAt"`
	UpdatedAt   time.Time          `json:"updatedAt"`
}

// AppTrader is one of an app's traders as read: the app's own id of them,
// when the app first made a link for them, their links and the accounts
// they connected and have not disconnected since: the accounts the app acts
// on for them.
type AppTrader struct {
	Trader      string    `json:"trader"`
	FirstSeenAt time.Time `json:"firstSeenAt"`
	LastLinkAt  time.Time `json:"lastLinkAt"`
	Links       int       `json:"links"`
	Accounts    []string  `json:"accounts"`
}

func foldApp(tx Tx, id string, c events.Committed) error {
	for _, e := range c.Events {
		var err error
		switch e := e.(type) {
		case evconnect.AppCreated:
			a := App{AppID: id, OrgID: e.OrgID, TenantID: e.TenantID, Env: e.Env, Counterpart: e.Counterpart, Settings: e.Settings,
				CreatedBy: e.CreatedBy, CreatedAt: e.At, UpdatedAt: e.At}
			if err = tx.Put(CollApp, id, a); err == nil {
				err = tx.Put(CollOrgApp, e.OrgID+"/"+id, id)
			}
			if err == nil && e.Counterpart != "" {
				err = tx.Put(CollAppOrigin, e.Counterpart, id)
			}
		case evconnect.AppUpdated:
			var a App
			if _, err = tx.Get(CollApp, id, &a); err == nil {
				a.Settings, a.UpdatedAt = e.Settings, e.At
				err = tx.Put(CollApp, id, a)
			}
		case evconnect.KeyIssued:
			var a App
			if _, err = tx.Get(CollApp, id, &a); err != nil {
				break
			}
			k := Key{KeyID: e.KeyID, TenantID: a.TenantID, Digest: e.Digest, Kind: "connect", Prefix: e.Prefix, CreatedAt: e.At,
				Name: e.Name, ExpiresAt: e.ExpiresAt, AppID: id, Env: e.Env, CreatedBy: e.CreatedBy}
			if err = tx.Put(CollKey, e.Digest, k); err == nil {
				if err = tx.Put(CollKeyID, e.KeyID, e.Digest); err == nil {
					err = tx.Put(CollAppKey, id+"/"+e.KeyID, e.Digest)
				}
			}
		case evconnect.KeyRevoked:
			err = revokeKey(tx, e.KeyID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// revokeKey marks the key of keyID revoked in the key read model.
func revokeKey(tx Tx, keyID string) error {
	var digest string
	if ok, err := tx.Get(CollKeyID, keyID, &digest); err != nil || !ok {
		return err
	}
	var k Key
	if ok, err := tx.Get(CollKey, digest, &k); err != nil || !ok {
		return err
	}
	k.Revoked = true
	return tx.Put(CollKey, digest, k)
}

func foldLink(tx Tx, id string, c events.Committed) error {
	var l evconnect.Link
	if _, err := tx.Get(CollLink, id, &l); err != nil {
		return err
	}
	l.ID = id
	for _, e := range c.Events {
		var err error
		switch e := e.(type) {
		case evconnect.LinkCreated:
			l = evconnect.Link{ID: id, AppID: e.AppID, Trader: e.Trader, KeyID: e.KeyID, State: evconnect.StateCreated,
				ExpiresAt: e.ExpiresAt, CreatedAt: e.At, UpdatedAt: e.At}
			if err = tx.Put(CollAppLink, e.AppID+"/"+SeqKey(c.Seq)+"/"+id, id); err == nil {
				if err = tx.Put(CollTraderLink, e.AppID+"/"+TraderKey(e.Trader)+"/"+SeqKey(c.Seq)+"/"+id, id); err == nil {
					err = traderSeen(tx, e.AppID, e.Trader, e.At, "")
				}
			}
		case evconnect.LinkMounted:
			l.State, l.UpdatedAt = evconnect.StateMounted, e.At
		case evconnect.LinkConnected:
			l.State, l.AccountID, l.UpdatedAt = evconnect.StateConnected, e.AccountID, e.At
			err = traderSeen(tx, l.AppID, l.Trader, e.At, e.AccountID)
		case evconnect.LinkClosed:
			l.State, l.UpdatedAt = evconnect.StateClosed, e.At
		case evconnect.LinkDisconnected:
			l.State, l.Disconnected, l.UpdatedAt = evconnect.StateClosed, true, e.At
			err = traderDropped(tx, l.AppID, l.Trader, l.AccountID)
		case evconnect.LinkFailed:
			l.State, l.Reason, l.UpdatedAt = evconnect.StateFailed, e.Reason, e.At
		default:
			continue
		}
		if err == nil {
			err = tx.Put(CollLink, id, l)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// traderDropped records that the trader disconnected the app from account.
func traderDropped(tx Tx, appID, trader, account string) error {
	var t AppTrader
	if ok, err := tx.Get(CollAppTrader, appID+"/"+trader, &t); err != nil || !ok {
		return err
	}
	t.Accounts = slices.DeleteFunc(t.Accounts, func(a string) bool { return a == account })
	return tx.Put(CollAppTrader, appID+"/"+trader, t)
}

// TraderKey is a trader's id as a key part: escaped, so no id holds the separator.
func TraderKey(trader string) string { return url.PathEscape(trader) }

// traderSeen records a link made for a trader (account "") or an account it connected.
func traderSeen(tx Tx, appID, trader string, at time.Time, account string) error {
	t := AppTrader{Trader: trader, FirstSeenAt: at, Accounts: []string{}}
	if _, err := tx.Get(CollAppTrader, appID+"/"+trader, &t); err != nil {
		return err
	}
	if account == "" {
		t.Links++
		t.LastLinkAt = at
	} else if !slices.Contains(t.Accounts, account) {
		t.Accounts = append(t.Accounts, account)
	}
	return tx.Put(CollAppTrader, appID+"/"+trader, t)
}
