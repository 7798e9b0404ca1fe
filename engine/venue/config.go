package venue

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/events"
	evvenue "github.com/svc/engine/events/venue"
)

// Item is one configuration item as the aggregate holds it.
type Item struct {
	Version   int
	Retired   bool
	Body      []byte
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (s *State) item(kind, id string) *Item {
	if m := s.Config[kind]; m != nil {
		return m[id]
	}
	return nil
}

// live reports whether the venue holds kind/id, not retired.
func (s *State) live(kind, id string) bool {
	it := s.item(kind, id)
	return it != nil && !it.Retired
}

func applyConfig(s *State, e evvenue.ConfigSet) {
	m := s.Config[e.Kind]
	if m == nil {
		m = map[string]*Item{}
		s.Config[e.Kind] = m
	}
	it := m[e.ID]
	if it == nil {
		it = &Item{CreatedAt: e.At}
		m[e.ID] = it
	}
	it.Version, it.Retired, it.UpdatedAt = e.Version, e.Retired, e.At
	if !e.Retired {
		it.Body = e.Body
	}
}

// versionConflict is 409 version_conflict naming the current version.
func versionConflict(current int) error {
	return commands.Refuse(commands.CodeVersionConflict,
		"the item changed since you read it (or exists already): read it again and send its current version",
		map[string]any{"version": current})
}

// ConfigView is a configuration item as answered.
func ConfigView(kind, id string, it Item) map[string]any {
	body := json.RawMessage(it.Body)
	if len(body) == 0 {
		body = json.RawMessage("{}")
	}
	return map[string]any{"kind": kind, "id": id, "version": it.Version, "retired": it.Retired, "spec": body,
		"createdAt": it.CreatedAt.UTC(), "updatedAt": it.UpdatedAt.UTC()}
}

// decideConfig creates, changes or retires one item, conditionally on the
// version read, after checking what it refers to exists and is live.
func decideConfig(s *State, env commands.Envelope, c *venuecmd.SetConfig) ([]events.Event, commands.Outcome, any, error) {
	cur := s.item(c.Kind, c.ID)
	version := 0
	if cur != nil {
		version = cur.Version
	}
	switch {
	case c.IfVersion != version:
		return nil, 0, nil, versionConflict(version)
	case c.Retire && cur.Retired:
		return nil, commands.Done, map[string]any{"item": ConfigView(c.Kind, c.ID, *cur)}, nil
	case cur == nil && len(s.Config[c.Kind]) >= venuecmd.MaxConfigItems:
		return nil, 0, nil, commands.Refuse(commands.CodeConfigLimitReached,
			fmt.Sprintf("a venue holds at most %d %s", venuecmd.MaxConfigItems, c.Kind), map[string]any{"limit": venuecmd.MaxConfigItems})
	}
	if !c.Retire {
		if err := references(s, c); err != nil {
			return nil, 0, nil, err
		}
	}
	e := evvenue.ConfigSet{Kind: c.Kind, ID: c.ID, Version: version + 1, Retired: c.Retire, Body: c.Canonical, At: env.At}
	next := Item{Version: e.Version, Retired: e.Retired, Body: e.Body, CreatedAt: env.At, UpdatedAt: env.At}
	if cur != nil {
		next.CreatedAt = cur.CreatedAt
		if c.Retire {
			next.Body = cur.Body
		}
	}
	status := commands.Done
	if cur == nil {
		status = commands.Created
	}
	return []events.Event{e}, status, map[string]any{"item": ConfigView(c.Kind, c.ID, next)}, nil
}

func missing(field, kind, id string) error {
	return commands.Refuse(commands.CodeInvalidRequest,
		fmt.Sprintf("%s names %s %q, which this venue does not hold (or retired)", field, kind, id), map[string]any{"field": field})
}

// references checks that what a group or rule names is live in the venue.
func references(s *State, c *venuecmd.SetConfig) error {
	switch c.Kind {
	case venuecmd.KindGroups:
		var g venuecmd.Group
		_ = json.Unmarshal(c.Canonical, &g)
		for i, in := range g.Instruments {
			if !s.live(venuecmd.KindInstruments, in) {
				return missing(fmt.Sprintf("instruments[%d]", i), "instrument", in)
			}
		}
		for _, ref := range []struct{ field, kind, id string }{{"conditionId", venuecmd.KindConditions, g.ConditionID},
			{"routeId", venuecmd.KindRoutes, g.RouteID}, {"stageId", venuecmd.KindStages, g.StageID}} {
			if ref.id != "" && !s.live(ref.kind, ref.id) {
				return missing(ref.field, ref.kind, ref.id)
			}
		}
		if g.RiskPolicyID != "" && s.Policies[g.RiskPolicyID] == nil {
			return missing("riskPolicyId", "risk policy", g.RiskPolicyID)
		}
	case venuecmd.KindRules:
		var r venuecmd.Rule
		_ = json.Unmarshal(c.Canonical, &r)
		if r.GroupID != "" && !s.live(venuecmd.KindGroups, r.GroupID) {
			return missing("groupId", "group", r.GroupID)
		}
	case venuecmd.KindRoutes:
		var r venuecmd.Route
		_ = json.Unmarshal(c.Canonical, &r)
		if id, ok := strings.CutPrefix(r.Target, "provider:"); ok {
			if _, known := s.Providers[id]; !known {
				return missing("target", "provider version", id)
			}
		}
	}
	return nil
}

// Terms compiles the terms of every live group of the venue at revision rev,
// keyed by venueID + "/" + groupID.
func Terms(s *State, rev uint64) map[string]*trading.Terms {
	out := map[string]*trading.Terms{}
	var rules []venuecmd.Rule
	for _, it := range s.Config[venuecmd.KindRules] {
		var r venuecmd.Rule
		if !it.Retired && json.Unmarshal(it.Body, &r) == nil {
			rules = append(rules, r)
		}
	}
	for gid, it := range s.Config[venuecmd.KindGroups] {
		if it.Retired {
			continue
		}
		var g venuecmd.Group
		if json.Unmarshal(it.Body, &g) != nil {
			continue
		}
		t := &trading.Terms{VenueID: s.ID, GroupID: gid, Revision: rev, Permitted: map[string]events.Decimal{}}
		for _, sym := range g.Instruments {
			in := s.item(venuecmd.KindInstruments, sym)
			var vi venuecmd.Instrument
			if in == nil || in.Retired || json.Unmarshal(in.Body, &vi) != nil || !vi.Active {
				continue
			}
			limit := events.Int(0)
			for _, l := range []*events.Decimal{vi.MaxQuantity, g.MaxQuantity} {
				if l != nil && (limit.IsZero() || l.Cmp(limit) < 0) {
					limit = *l
				}
			}
			t.Permitted[sym] = limit
		}
		for _, r := range rules {
			if r.GroupID != "" && r.GroupID != gid {
				continue
			}
			t.EntryHalted = t.EntryHalted || r.EntryHalted
			if len(r.Instruments) > 0 {
				for sym := range t.Permitted {
					if !slices.Contains(r.Instruments, sym) {
						delete(t.Permitted, sym)
					}
				}
			}
			if r.MaxQuantity != nil {
				for sym, l := range t.Permitted {
					if l.IsZero() || r.MaxQuantity.Cmp(l) < 0 {
						t.Permitted[sym] = *r.MaxQuantity
					}
				}
			}
		}
		if rt := s.item(venuecmd.KindRoutes, g.RouteID); g.RouteID != "" && rt != nil && !rt.Retired {
			var r venuecmd.Route
			if json.Unmarshal(rt.Body, &r) == nil {
				t.Route = r.Target
			}
		}
		if st := s.item(venuecmd.KindStages, g.StageID); g.StageID != "" && st != nil && !st.Retired {
			var sg venuecmd.Stage
			if json.Unmarshal(st.Body, &sg) == nil {
				t.StageID, t.StageVersion = g.StageID, sg.Version
			}
		}
		if cd := s.item(venuecmd.KindConditions, g.ConditionID); g.ConditionID != "" && cd != nil && !cd.Retired {
			var c venuecmd.Condition
			if json.Unmarshal(cd.Body, &c) == nil {
				for _, m := range c.Commissions {
					t.Commissions = append(t.Commissions, trading.Commission{Name: m.Name, PerUnit: m.Basis == "per_unit",
						Amount: m.Amount, RoundTurn: m.Timing == "round_turn", Direction: m.Direction})
				}
			}
		}
		if g.RiskPolicyID != "" {
			if v, pol, ok := s.inForce(g.RiskPolicyID); ok {
				t.PolicyID, t.PolicyVersion = g.RiskPolicyID, v
				if pol.DailyLossLimit != nil {
					d := pol.DailyLossLimit.Value
					t.DailyLossLimit = &d
				}
				if pol.WeeklyLossLimit != nil {
					w := pol.WeeklyLossLimit.Value
					t.WeeklyLossLimit = &w
				}
			}
		}
		out[s.ID+"/"+gid] = t
	}
	return out
}
