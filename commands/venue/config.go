package venue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
)

// Kinds of a venue's configuration, as their routes name them.
const (
	KindInstruments = "instruments"
	KindConditions  = "conditions"
	KindGroups      = "groups"
	KindRoutes      = "routes"
	KindStages      = "stages"
	KindRules       = "rules"
)

// ConfigKinds are every kind of venue configuration.
var ConfigKinds = []string{KindInstruments, KindConditions, KindGroups, KindRoutes, KindStages, KindRules}

// TraderFeedSource is the one pricing source served from each trader's own
// feed (their futures connection): the only sourceId an entitlement may name.
const TraderFeedSource = "trader_feed"

// Bounds of configuration.
const (
	MaxConfigItems = 500 // per kind and venue
	MaxListed      = 200 // instruments a group or rule names
	MaxCommissions = 8
)

// Instrument is a venue instrument: a catalog symbol its traders may trade
// (its id is the symbol), the venue's own per-order limit, whether it is
// active, and an optional entitlement naming the pricing source.
type Instrument struct {
	MaxQuantity *events.Decimal `json:"maxQuantity,omitempty"`
	Active      bool            `json:"active"`
	Entitlement *Entitlement    `json:"entitlement,omitempty"`
}

// Entitlement names where an instrument's price comes from.
type Entitlement struct {
	Pricing struct {
		SourceID string `json:"sourceId"`
	} `json:"pricing"`
}

// Commission is one charge of a condition, posted on fills in the account
// currency's decimals: per unit of quantity or per order, per side or per
// round turn (half on each side), on opening fills, closing fills or both.
type Commission struct {
	Name      string         `json:"name"`
	Basis     string         `json:"basis"` // per_unit or per_order
	Amount    events.Decimal `json:"amount"`
	Timing    string         `json:"timing"`         // per_side or round_turn
	Direction string         `json:"direction"`      // open, close or both
	Unit      string         `json:"unit,omitempty"` // quantity, for per_unit
}

// Condition is a set of commissions. margin and financing are superseded
// (the published risk policy carries them) and refused.
type Condition struct {
	Name        string          `json:"name"`
	Commissions []Commission    `json:"commissions"`
	Margin      json.RawMessage `json:"margin,omitempty"`
	Financing   json.RawMessage `json:"financing,omitempty"`
}

// Group is what accounts are issued into: the instruments they may trade,
// their condition, route and stage, and profile overrides.
type Group struct {
	Name            string          `json:"name"`
	Instruments     []string        `json:"instruments"`
	ConditionID     string          `json:"conditionId,omitempty"`
	RouteID         string          `json:"routeId,omitempty"`
	StageID         string          `json:"stageId,omitempty"`
	RiskPolicyID    string          `json:"riskPolicyId,omitempty"` // the published policy its accounts live under
	MaxQuantity     *events.Decimal `json:"maxQuantity,omitempty"`
	DailyLossLimit  json.RawMessage `json:"dailyLossLimit,omitempty"`
	WeeklyLossLimit json.RawMessage `json:"weeklyLossLimit,omitempty"`
	Margin          json.RawMessage `json:"margin,omitempty"`
	Financing       json.RawMessage `json:"financing,omitempty"`
}

// Route sends a group's orders to the paper book ("paper") or to a
// registered provider version ("provider:<id>").
type Route struct {
	Target string `json:"target"`
}

// Stage is an evaluation or funding stage; accounts record its version when
// issued, and an account whose recorded version is not the current one is
// close-only.
type Stage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Rule is a venue rule, for one group or (no groupId) every group: an entry
// halt, the instruments permitted (empty: those of the group) and a per-order
// quantity limit.
type Rule struct {
	GroupID     string          `json:"groupId,omitempty"`
	EntryHalted bool            `json:"entryHalted"`
	Instruments []string        `json:"instruments,omitempty"`
	MaxQuantity *events.Decimal `json:"maxQuantity,omitempty"`
}

// SetConfig creates (IfVersion 0), changes (IfVersion the version read) or
// retires (Retire, IfVersion the version read) one configuration item.
type SetConfig struct {
	Kind      string          `json:"-"`
	ID        string          `json:"-"`
	Body      json.RawMessage `json:"-"`
	IfVersion int             `json:"-"`
	Retire    bool            `json:"-"`
	Canonical []byte          `json:"-"` // set by Validate: the validated body
}

func unsupported(field, msg string) error {
	return commands.Refuse(commands.CodeUnsupportedValue, msg, map[string]any{"field": field})
}

func refuse(code commands.Code, field, msg string) error {
	return commands.MalformedRefusal(code, msg, map[string]any{"field": field})
}

// UnstatedLossLimits refuses a dailyLossLimit or weeklyLossLimit stated in a
// group or an account's issue (null or absent passes): 400
// loss_limit_unenforced with the field. A loss limit is the published risk
// policy's; one stated here would not be enforced.
func UnstatedLossLimits(daily, weekly json.RawMessage) error {
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"dailyLossLimit", daily}, {"weeklyLossLimit", weekly}} {
		if len(bytes.TrimSpace(f.raw)) > 0 && string(bytes.TrimSpace(f.raw)) != "null" {
			return refuse(commands.CodeLossLimitUnenforced, f.name,
				f.name+" is the published risk policy's: a limit stated here would not be enforced; send null or omit it")
		}
	}
	return nil
}

func strict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return commands.BadRequest("malformed body: %v", err)
	}
	return nil
}

func positive(field string, d *events.Decimal) error {
	if d == nil {
		return nil
	}
	if d.Sign() <= 0 {
		return commands.BadField(field, nil, "%s must be above zero", field)
	}
	return commands.Amount(field, *d, commands.MaxAmount)
}

// refs checks the ids an item names: each empty or a key of at most 64 characters.
func refs(named map[string]string) error {
	for field, id := range named {
		if id != "" {
			if err := commands.Key(field, id, 64); err != nil {
				return err
			}
		}
	}
	return nil
}

func ids(field string, list []string) error {
	if len(list) > MaxListed {
		return commands.BadField(field, map[string]any{"max": MaxListed}, "%s names at most %d items", field, MaxListed)
	}
	seen := map[string]bool{}
	for i, id := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := commands.Key(f, id, 64); err != nil {
			return err
		}
		if seen[id] {
			return commands.BadField(f, nil, "%s is named twice", id)
		}
		seen[id] = true
	}
	return nil
}

// Validate checks the item's shape by its kind and keeps its canonical body.
func (c *SetConfig) Validate() error {
	if !slices.Contains(ConfigKinds, c.Kind) {
		return commands.Refuse(commands.CodeNotFound, "no such kind of venue configuration", nil)
	}
	if err := commands.Key("id", c.ID, 64); err != nil {
		return err
	}
	if c.IfVersion < 0 || (c.Retire && c.IfVersion == 0) {
		return commands.BadField("version", nil, "send the version you read")
	}
	if c.Retire {
		c.Canonical = []byte("{}")
		return nil
	}
	var v any
	var err error
	switch c.Kind {
	case KindInstruments:
		v, err = instrument(c.Body)
	case KindConditions:
		v, err = condition(c.Body)
	case KindGroups:
		v, err = group(c.Body)
	case KindRoutes:
		var r Route
		if err = strict(c.Body, &r); err == nil {
			if id, ok := strings.CutPrefix(r.Target, "provider:"); ok {
				err = commands.Key("target", id, 64)
			} else if r.Target != "paper" {
				err = unsupported("target", `target is "paper" or "provider:<provider version id>"`)
			}
		}
		v = r
	case KindStages:
		var s Stage
		if err = strict(c.Body, &s); err == nil {
			if err = commands.Identifier("name", s.Name, MaxName); err == nil {
				err = commands.Key("version", s.Version, 64)
			}
		}
		v = s
	case KindRules:
		var r Rule
		if err = strict(c.Body, &r); err == nil {
			if err = refs(map[string]string{"groupId": r.GroupID}); err == nil {
				if err = ids("instruments", r.Instruments); err == nil {
					err = positive("maxQuantity", r.MaxQuantity)
				}
			}
		}
		v = r
	}
	if err != nil {
		return err
	}
	c.Canonical, err = json.Marshal(v)
	return err
}

func instrument(raw []byte) (Instrument, error) {
	var in Instrument
	if err := strict(raw, &in); err != nil {
		return in, err
	}
	if err := positive("maxQuantity", in.MaxQuantity); err != nil {
		return in, err
	}
	if in.Entitlement != nil && in.Entitlement.Pricing.SourceID != TraderFeedSource {
		return in, refuse(commands.CodeEntitledSourceUnserved, "entitlement.pricing.sourceId",
			"entitlement.pricing.sourceId names a source not served from each trader's own feed; the one served is "+TraderFeedSource)
	}
	return in, nil
}

func condition(raw []byte) (Condition, error) {
	var c Condition
	if err := strict(raw, &c); err != nil {
		return c, err
	}
	switch {
	case len(c.Margin) > 0 && string(c.Margin) != "null":
		return c, refuse(commands.CodeMarginPolicySuperseded, "margin", "margin is set by the published risk policy: send margin: null or omit it")
	case len(c.Financing) > 0:
		return c, refuse(commands.CodeFinancingSuperseded, "financing", "financing is set by the published risk policy: omit it")
	}
	c.Margin = nil
	if err := commands.Identifier("name", c.Name, MaxName); err != nil {
		return c, err
	}
	if len(c.Commissions) > MaxCommissions {
		return c, commands.BadField("commissions", map[string]any{"max": MaxCommissions}, "at most %d commissions", MaxCommissions)
	}
	for i, m := range c.Commissions {
		f := fmt.Sprintf("commissions[%d]", i)
		switch {
		case commands.Identifier(f+".name", m.Name, MaxName) != nil:
			return c, commands.Identifier(f+".name", m.Name, MaxName)
		case m.Basis != "per_unit" && m.Basis != "per_order":
			return c, unsupported(f+".basis", "basis is per_unit or per_order")
		case m.Amount.Sign() < 0 || m.Amount.Decimals() > 6 || m.Amount.Cmp(commands.MaxAmount) > 0:
			return c, commands.BadField(f+".amount", map[string]any{"max": commands.MaxAmount.String()},
				"%s.amount is zero to %s, with at most 6 decimals", f, commands.MaxAmount)
		case m.Timing != "per_side" && m.Timing != "round_turn":
			return c, unsupported(f+".timing", "timing is per_side or round_turn")
		case m.Direction != "open" && m.Direction != "close" && m.Direction != "both":
			return c, unsupported(f+".direction", "direction is open, close or both")
		case m.Timing == "round_turn" && m.Direction != "both":
			return c, refuse(commands.CodeRoundTurnIsBoth, f+".direction", "a round_turn commission is charged on both sides: direction must be both")
		case m.Basis == "per_unit" && m.Unit != "quantity":
			return c, unsupported(f+".unit", "a per_unit commission's unit is quantity")
		case m.Basis == "per_order" && m.Unit != "":
			return c, unsupported(f+".unit", "a per_order commission has no unit")
		}
	}
	return c, nil
}

func group(raw []byte) (Group, error) {
	var g Group
	if err := strict(raw, &g); err != nil {
		return g, err
	}
	switch {
	case len(g.Margin) > 0 && string(g.Margin) != "null":
		return g, refuse(commands.CodeMarginPolicySuperseded, "margin", "margin is set by the published risk policy: send margin: null or omit it")
	case len(g.Financing) > 0:
		return g, refuse(commands.CodeFinancingSuperseded, "financing", "financing is set by the published risk policy: omit it")
	}
	if err := UnstatedLossLimits(g.DailyLossLimit, g.WeeklyLossLimit); err != nil {
		return g, err
	}
	g.Margin, g.DailyLossLimit, g.WeeklyLossLimit = nil, nil, nil
	if err := commands.Identifier("name", g.Name, MaxName); err != nil {
		return g, err
	}
	if err := refs(map[string]string{"conditionId": g.ConditionID, "routeId": g.RouteID, "stageId": g.StageID, "riskPolicyId": g.RiskPolicyID}); err != nil {
		return g, err
	}
	if err := ids("instruments", g.Instruments); err != nil {
		return g, err
	}
	return g, positive("maxQuantity", g.MaxQuantity)
}
