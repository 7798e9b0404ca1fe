package venue

import (
	"encoding/json"
	"strings"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
)

// ReservedPolicyPrefix starts the ids of the service's own risk policies.
const ReservedPolicyPrefix = "svc-"

// Figure is a number a risk policy states, and whether its source is stated
// (an unsourced figure cannot be published).
type Figure struct {
	Value   events.Decimal `json:"value"`
	Sourced bool           `json:"sourced"`
}

// Posting is the currency a policy's money figures are in and the decimals
// they post at: the paper book posts USD at 2, USDC and USDT at 6.
type Posting struct {
	Currency string `json:"currency"`
	Decimals int    `json:"decimals"`
}

// Policy is one version of a venue's risk policy.
type Policy struct {
	Authority       string  `json:"authority"` // the venue whose policy it is
	Posting         Posting `json:"posting"`
	DailyLossLimit  *Figure `json:"dailyLossLimit,omitempty"`
	WeeklyLossLimit *Figure `json:"weeklyLossLimit,omitempty"`
}

// PostingDecimals is how many decimals the paper book posts currency in.
func PostingDecimals(currency string) (int, bool) {
	switch currency {
	case "USD":
		return 2, true
	case "USDC", "USDT":
		return 6, true
	}
	return 0, false
}

func policyID(id string) error {
	if err := commands.Key("policyId", id, 64); err != nil {
		return err
	}
	if strings.HasPrefix(id, ReservedPolicyPrefix) {
		return commands.Refuse(commands.CodeRiskPolicyIDReserved,
			"policy ids starting with "+ReservedPolicyPrefix+" are the service's own", map[string]any{"field": "policyId"})
	}
	return nil
}

// StatePolicy states one version of a risk policy; a stored version never changes.
type StatePolicy struct {
	PolicyID  string          `json:"-"`
	Version   string          `json:"-"`
	Body      json.RawMessage `json:"-"`
	Canonical []byte          `json:"-"` // set by Validate
	Policy    Policy          `json:"-"` // set by Validate
}

// Validate checks the id (not reserved), the version and the content: an
// authority, a posting term at the book's precision (409
// risk_policy_posting_mismatch otherwise), and loss limits above zero.
func (c *StatePolicy) Validate() error {
	if err := policyID(c.PolicyID); err != nil {
		return err
	}
	if err := commands.Key("version", c.Version, 64); err != nil {
		return err
	}
	if err := strict(c.Body, &c.Policy); err != nil {
		return err
	}
	p := c.Policy
	if err := commands.Key("authority", p.Authority, 64); err != nil {
		return err
	}
	if n, ok := PostingDecimals(p.Posting.Currency); !ok || n != p.Posting.Decimals {
		return commands.Refuse(commands.CodeRiskPolicyPostingMismatch,
			"the posting term states a currency or precision the paper book does not post at (USD in 2 decimals; USDC and USDT in 6)",
			map[string]any{"field": "posting"})
	}
	for _, f := range []struct {
		name string
		fig  *Figure
	}{{"dailyLossLimit", p.DailyLossLimit}, {"weeklyLossLimit", p.WeeklyLossLimit}} {
		if f.fig != nil && (f.fig.Value.Sign() <= 0 || f.fig.Value.Decimals() > p.Posting.Decimals || f.fig.Value.Cmp(commands.MaxAmount) > 0) {
			return commands.BadField(f.name+".value", nil, "%s.value is above zero and at most %s, in at most %d decimals", f.name, commands.MaxAmount, p.Posting.Decimals)
		}
	}
	var err error
	c.Canonical, err = json.Marshal(p)
	return err
}

// PublishPolicy puts a stated version of a risk policy in force.
type PublishPolicy struct {
	PolicyID string `json:"-"`
	Version  string `json:"version"`
}

// Validate checks the shape.
func (c *PublishPolicy) Validate() error {
	if err := policyID(c.PolicyID); err != nil {
		return err
	}
	return commands.Key("version", c.Version, 64)
}
