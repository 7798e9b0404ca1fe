// Package connect holds the commands of Connect: apps and their API keys
// (the Connect dashboard), links (an app's backend and hosted Connect) and
// the redemption of Connect account statements (the sandbox).
package connect

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/events"
	evconnect "github.com/svc/engine/events/connect"
)

// Bounds of Connect inputs.
const (
	MaxName       = 64
	MaxURL        = 512
	MaxWebsites   = 10
	MaxKeys       = 25 // live keys per app
	MaxKeyLife    = 2 * 366 * 24 * time.Hour
	MaxTrader     = 128 // the app's own id of a trader
	LinkLife      = time.Hour
	MaxAppsPerOrg = 50
)

// Owner is who acts in the dashboard: a user, whether their email is
// verified and whether they own the app's organization now, as the gateway
// read it; the aggregate decides from these facts (as a venue's owner).
type Owner = venuecmd.Owner

// DefaultWhiteLabel is the white-label paper of an app that states none.
func DefaultWhiteLabel() evconnect.WhiteLabel {
	return evconnect.WhiteLabel{Enabled: true, Label: "Paper", Currency: "USD", StartingBalance: events.Int(50000)}
}

// Origin checks a website allowed to embed hosted Connect: an origin
// (scheme://host[:port], nothing after), https, or http on a loopback host.
// It answers the origin as browsers send it: lower-case, no trailing slash.
func Origin(field, v string) (string, error) {
	bad := func() (string, error) {
		return "", commands.BadField(field, nil, "%s holds origins such as https://app.example.com: a scheme, a host and an optional port, nothing after; http only for a loopback host (localhost, 127.0.0.1, [::1])", field)
	}
	if v == "" || len(v) > MaxURL {
		return bad()
	}
	u, err := url.Parse(strings.ToLower(v))
	if err != nil || u.Host == "" || strings.HasSuffix(u.Host, ":") || !port(u.Port()) || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return bad()
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopback(u.Hostname()) {
			return bad()
		}
	default:
		return bad()
	}
	if strings.ContainsAny(u.Host, " *") {
		return bad()
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// port reports whether p is no port or one of 1 to 65535.
func port(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == p
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckSettings validates an app's settings and puts them in canonical form
// (websites as origins, the white-label paper's defaults).
func CheckSettings(s *evconnect.Settings) error {
	if err := commands.Identifier("name", s.Name, MaxName); err != nil {
		return err
	}
	if s.LogoURL != "" {
		u, err := url.Parse(s.LogoURL)
		if err != nil || len(s.LogoURL) > MaxURL || u.Host == "" || u.User != nil || (u.Scheme != "https" && !(u.Scheme == "http" && loopback(u.Hostname()))) {
			return commands.BadField("logoUrl", nil, "logoUrl is an https URL of at most %d characters", MaxURL)
		}
	}
	if len(s.Websites) == 0 || len(s.Websites) > MaxWebsites {
		return commands.BadField("websites", map[string]any{"max": MaxWebsites},
			"websites lists 1 to %d origins allowed to embed hosted Connect", MaxWebsites)
	}
	seen := map[string]bool{}
	for i, w := range s.Websites {
		o, err := Origin("websites", w)
		if err != nil {
			return err
		}
		if seen[o] {
			return commands.BadField("websites", nil, "websites names %s twice", o)
		}
		seen[o], s.Websites[i] = true, o
	}
	wl := &s.WhiteLabel
	if wl.Currency == "" {
		wl.Currency = "USD"
	}
	if wl.Currency != "USD" {
		return commands.BadField("whiteLabel.currency", nil, "white-label paper accounts are issued in USD")
	}
	if wl.Label == "" {
		wl.Label = "Paper"
	}
	if err := commands.Identifier("whiteLabel.label", wl.Label, MaxName); err != nil {
		return err
	}
	if wl.StartingBalance.IsZero() {
		wl.StartingBalance = events.Int(50000)
	}
	if wl.StartingBalance.Sign() <= 0 {
		return commands.InvalidField("whiteLabel.startingBalance", nil, "whiteLabel.startingBalance is positive")
	}
	if err := commands.Amount("whiteLabel.startingBalance", wl.StartingBalance, commands.MaxAmount); err != nil {
		return err
	}
	return firmcmd.CheckPrecision(wl.StartingBalance, wl.Currency, "evaluation")
}

// CreateApp makes an app of an organization whose verified owner asks.
type CreateApp struct {
	OrgID       string             `json:"orgId"`
	Settings    evconnect.Settings `json:"-"`
	TenantID    string             `json:"-"`
	Env         string             `json:"-"`
	Counterpart string             `json:"-"`
	By          Owner              `json:"-"`
}

// Validate checks the shape.
func (c *CreateApp) Validate() error {
	if err := commands.Key("orgId", c.OrgID, 64); err != nil {
		return err
	}
	return CheckSettings(&c.Settings)
}

// UpdateApp replaces an app's settings.
type UpdateApp struct {
	Settings evconnect.Settings
	By       Owner
}

// Validate checks the shape.
func (c *UpdateApp) Validate() error { return CheckSettings(&c.Settings) }

// IssueKey issues an app API key; the gateway made the secret and sends its digest only.
type IssueKey struct {
	KeyID     string    `json:"-"`
	Digest    string    `json:"-"`
	Prefix    string    `json:"-"`
	Env       string    `json:"-"`
	Name      string    `json:"name"`
	ExpiresAt time.Time `json:"expiresAt"`
	Now       time.Time `json:"-"`
	By        Owner     `json:"-"`
}

// Validate checks the shape: a name and an expiry in the future within two years.
func (c *IssueKey) Validate() error {
	if err := commands.Identifier("name", c.Name, MaxName); err != nil {
		return err
	}
	switch {
	case c.ExpiresAt.IsZero():
		return commands.BadField("expiresAt", nil, "expiresAt is required: an app key always expires")
	case !c.ExpiresAt.After(c.Now):
		return commands.BadField("expiresAt", nil, "expiresAt must be in the future")
	case c.ExpiresAt.Sub(c.Now) > MaxKeyLife:
		return commands.BadField("expiresAt", nil, "expiresAt is at most two years away")
	}
	return nil
}

// RevokeKey revokes an app key.
type RevokeKey struct {
	KeyID string
	By    Owner
}

// Validate checks the shape.
func (c *RevokeKey) Validate() error { return commands.Key("keyId", c.KeyID, 64) }

// Trader checks the app's own id of a trader: 1 to 128 printable characters.
func Trader(field, v string) error { return commands.Identifier(field, v, MaxTrader) }

// CreateLink makes a link for one of the app's traders.
type CreateLink struct {
	Trader    string    `json:"trader"`
	AppID     string    `json:"-"`
	KeyID     string    `json:"-"`
	ExpiresAt time.Time `json:"-"`
}

// Validate checks the shape.
func (c *CreateLink) Validate() error { return Trader("trader", c.Trader) }

// MountLink records that hosted Connect opened the link.
type MountLink struct{}

// Validate checks the shape.
func (*MountLink) Validate() error { return nil }

// ConnectLink records the account the trader connected on the link.
type ConnectLink struct{ AccountID string }

// Validate checks the shape.
func (c *ConnectLink) Validate() error { return commands.Key("accountId", c.AccountID, 64) }

// DisconnectLink ends the grant a connected link gave its app on AccountID:
// the trader's disconnect. By names who asked ("hosted", or a user id).
type DisconnectLink struct {
	AccountID string
	By        string
}

// Validate checks the shape.
func (c *DisconnectLink) Validate() error {
	if err := commands.Key("accountId", c.AccountID, 64); err != nil {
		return err
	}
	return commands.Key("by", c.By, 64)
}

// CloseLink closes a link (the app's backend).
type CloseLink struct{}

// Validate checks the shape.
func (*CloseLink) Validate() error { return nil }

// RedeemStatement spends a statement's single-use id.
type RedeemStatement struct {
	ID      string
	Email   string
	Expires time.Time
}

// Validate checks the shape.
func (c *RedeemStatement) Validate() error {
	if err := commands.Key("statement.jti", c.ID, 64); err != nil {
		return err
	}
	return commands.Email("statement.email", c.Email)
}
