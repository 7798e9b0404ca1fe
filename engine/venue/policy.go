package venue

import (
	"bytes"
	"encoding/json"
	"sort"
	"time"

	"github.com/svc/engine/commands"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/events"
	evvenue "github.com/svc/engine/events/venue"
)

// Policy is a risk policy of the venue: its stated versions (never changed)
// and the one in force ("" until one is published).
type Policy struct {
	Versions map[string][]byte
	Stated   map[string]time.Time
	InForce  string
}

func (s *State) policy(id string) *Policy {
	p := s.Policies[id]
	if p == nil {
		p = &Policy{Versions: map[string][]byte{}, Stated: map[string]time.Time{}}
		s.Policies[id] = p
	}
	return p
}

func applyPolicy(s *State, e events.Event) {
	switch e := e.(type) {
	case evvenue.PolicyStated:
		p := s.policy(e.PolicyID)
		p.Versions[e.Version], p.Stated[e.Version] = e.Body, e.At
	case evvenue.PolicyPublished:
		s.policy(e.PolicyID).InForce = e.Version
	}
}

// PolicyView is a risk policy as answered.
func PolicyView(id string, p *Policy) map[string]any {
	versions := make([]string, 0, len(p.Versions))
	for v := range p.Versions {
		versions = append(versions, v)
	}
	sort.Strings(versions)
	out := []map[string]any{}
	for _, v := range versions {
		out = append(out, map[string]any{"version": v, "policy": json.RawMessage(p.Versions[v]), "statedAt": p.Stated[v].UTC()})
	}
	var inForce any
	if p.InForce != "" {
		inForce = p.InForce
	}
	return map[string]any{"id": id, "inForce": inForce, "versions": out}
}

func unstated() error {
	return commands.Refuse(commands.CodeNotFound, "this venue has stated no such risk policy version", nil)
}

func decideStatePolicy(s *State, env commands.Envelope, c *venuecmd.StatePolicy) ([]events.Event, commands.Outcome, any, error) {
	if c.Policy.Authority != s.ID {
		return nil, 0, nil, commands.Refuse(commands.CodeRiskPolicyOwnerConflict,
			"the policy's authority names another venue", map[string]any{"field": "authority"})
	}
	cur := s.Policies[c.PolicyID]
	if cur != nil {
		if body, stated := cur.Versions[c.Version]; stated {
			if !bytes.Equal(body, c.Canonical) {
				return nil, 0, nil, commands.Refuse(commands.CodeRiskPolicyVersionConflict,
					"this version was stated with other content; a version never changes: state a new one", map[string]any{"version": c.Version})
			}
			return nil, commands.Done, map[string]any{"policy": PolicyView(c.PolicyID, cur)}, nil
		}
	}
	e := evvenue.PolicyStated{PolicyID: c.PolicyID, Version: c.Version, Body: c.Canonical, At: env.At}
	next := &Policy{Versions: map[string][]byte{c.Version: c.Canonical}, Stated: map[string]time.Time{c.Version: env.At}}
	if cur != nil {
		for v, b := range cur.Versions {
			next.Versions[v], next.Stated[v] = b, cur.Stated[v]
		}
		next.InForce = cur.InForce
	}
	return []events.Event{e}, commands.Created, map[string]any{"policy": PolicyView(c.PolicyID, next)}, nil
}

func decidePublish(s *State, env commands.Envelope, c *venuecmd.PublishPolicy) ([]events.Event, commands.Outcome, any, error) {
	cur := s.Policies[c.PolicyID]
	if cur == nil {
		return nil, 0, nil, unstated()
	}
	body, stated := cur.Versions[c.Version]
	switch {
	case !stated:
		return nil, 0, nil, unstated()
	case cur.InForce == c.Version:
		return nil, 0, nil, commands.Refuse(commands.CodeRiskPolicyUnchanged, "this version is in force already", map[string]any{"version": c.Version})
	}
	var p venuecmd.Policy
	_ = json.Unmarshal(body, &p)
	for _, f := range []struct {
		name string
		fig  *venuecmd.Figure
	}{{"dailyLossLimit", p.DailyLossLimit}, {"weeklyLossLimit", p.WeeklyLossLimit}} {
		if f.fig != nil && !f.fig.Sourced {
			return nil, 0, nil, commands.Refuse(commands.CodeRiskPolicyUnsourced,
				"the version states a figure without its source: it cannot be published", map[string]any{"field": f.name})
		}
	}
	next := &Policy{Versions: cur.Versions, Stated: cur.Stated, InForce: c.Version}
	return []events.Event{evvenue.PolicyPublished{PolicyID: c.PolicyID, Version: c.Version, At: env.At}}, commands.Done,
		map[string]any{"policy": PolicyView(c.PolicyID, next)}, nil
}

// inForce is the policy version in force for id: its version and content.
func (s *State) inForce(id string) (string, venuecmd.Policy, bool) {
	p := s.Policies[id]
	if p == nil || p.InForce == "" {
		return "", venuecmd.Policy{}, false
	}
	var pol venuecmd.Policy
	if json.Unmarshal(p.Versions[p.InForce], &pol) != nil {
		return "", venuecmd.Policy{}, false
	}
	return p.InForce, pol, true
}
