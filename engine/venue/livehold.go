package venue

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/svc/engine/commands"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/events"
	evvenue "github.com/svc/engine/events/venue"
)

// LiveHold is one hold on live trading as its commits leave it.
type LiveHold struct {
	Reason string
	By     evvenue.Actor // who stated the reason in force
	Since  time.Time     // when the hold began
	At     time.Time     // when its reason was last stated
}

// Live is the venue's holds on live trading (events/venue.LiveHeld): the
// whole venue's (nil: none) and single traders', by lower-cased email.
type Live struct {
	Venue   *LiveHold
	Traders map[string]*LiveHold
}

func (l *Live) get(trader string) *LiveHold {
	if trader == "" {
		return l.Venue
	}
	return l.Traders[trader]
}

// applyLive folds a hold or a release into l.
func applyLive(l *Live, e events.Event) {
	switch e := e.(type) {
	case evvenue.LiveHeld:
		h := l.get(e.Trader)
		if h == nil {
			h = &LiveHold{Since: e.At}
			if e.Trader == "" {
				l.Venue = h
			} else {
				if l.Traders == nil {
					l.Traders = map[string]*LiveHold{}
				}
				l.Traders[e.Trader] = h
			}
		}
		h.Reason, h.By, h.At = e.Reason, e.By, e.At
	case evvenue.LiveReleased:
		if e.Trader == "" {
			l.Venue = nil
		} else {
			delete(l.Traders, e.Trader)
		}
	}
}

// actor resolves who acts: a verified owner of the venue's organization,
// or a live key of this venue.
func actor(s *State, by venuecmd.Actor) (evvenue.Actor, error) {
	if by.Owner != nil {
		if err := owner(*by.Owner); err != nil {
			return evvenue.Actor{}, err
		}
		return evvenue.Actor{Kind: evvenue.ActorOwner, ID: by.Owner.UserID, Name: by.Email}, nil
	}
	if k, ok := s.Keys[by.KeyID]; ok && !k.Revoked {
		return evvenue.Actor{Kind: evvenue.ActorKey, ID: k.KeyID, Name: k.Name}, nil
	}
	return evvenue.Actor{}, commands.Refuse(commands.CodePermissionDenied, "only an owner of the venue's organization or one of its keys holds live trading", nil)
}

// decideHold holds live trading off for the venue or one trader. The same
// hold with the same reason records nothing; another reason is recorded.
func decideHold(s *State, env commands.Envelope, c *venuecmd.HoldLive) ([]events.Event, commands.Outcome, any, error) {
	by, err := actor(s, c.By)
	if err != nil {
		return nil, 0, nil, err
	}
	cur := s.Live.get(c.Trader)
	if cur != nil && cur.Reason == c.Reason {
		return nil, commands.Done, liveAnswer(s, c.Trader, cur, len(s.Live.Traders)), nil
	}
	n := len(s.Live.Traders)
	if cur == nil && c.Trader != "" {
		if n >= venuecmd.MaxTraderHolds {
			return nil, 0, nil, commands.Refuse(commands.CodeLiveHoldLimitReached,
				fmt.Sprintf("the venue holds %d traders one by one, the most it may: release one first, or hold the whole venue", venuecmd.MaxTraderHolds),
				map[string]any{"limit": venuecmd.MaxTraderHolds})
		}
		n++
	}
	next := &LiveHold{Reason: c.Reason, By: by, Since: env.At, At: env.At}
	if cur != nil {
		next.Since = cur.Since
	}
	e := evvenue.LiveHeld{Trader: c.Trader, Reason: c.Reason, By: by, Firm: s.FirmTenantID, At: env.At}
	return []events.Event{e}, commands.Done, liveAnswer(s, c.Trader, next, n), nil
}

// decideRelease ends a hold; releasing what is not held records nothing.
func decideRelease(s *State, env commands.Envelope, c *venuecmd.ReleaseLive) ([]events.Event, commands.Outcome, any, error) {
	by, err := actor(s, c.By)
	if err != nil {
		return nil, 0, nil, err
	}
	n := len(s.Live.Traders)
	if s.Live.get(c.Trader) == nil {
		return nil, commands.Done, liveAnswer(s, c.Trader, nil, n), nil
	}
	if c.Trader != "" {
		n--
	}
	e := evvenue.LiveReleased{Trader: c.Trader, By: by, Firm: s.FirmTenantID, At: env.At}
	return []events.Event{e}, commands.Done, liveAnswer(s, c.Trader, nil, n), nil
}

// liveAnswer is a write's answer: the venue's holds as the write leaves
// them (h: the hold of the scope written, trader or venue; n: the traders
// held one by one) and, for a trader, that trader's.
func liveAnswer(s *State, trader string, h *LiveHold, n int) map[string]any {
	if trader == "" {
		return map[string]any{"liveTrading": summary(s.ID, h, n)}
	}
	return map[string]any{"liveTrading": summary(s.ID, s.Live.Venue, n), "trader": TraderView(trader, h)}
}

func summary(venueID string, all *LiveHold, n int) map[string]any {
	var hold any
	if all != nil {
		hold = holdView(all)
	}
	return map[string]any{"venueId": venueID, "held": all != nil, "hold": hold, "tradersHeld": n, "traderLimit": venuecmd.MaxTraderHolds}
}

// LiveView is the venue's holds as its read answers them: the whole
// venue's (hold, null when none), how many traders it holds one by one and
// the most it may, and each of them by email (all of them, or the one
// trader names when not empty, held or not).
func LiveView(venueID string, l Live, trader string) map[string]any {
	var traders []map[string]any
	if trader != "" {
		traders = []map[string]any{TraderView(trader, l.Traders[trader])}
	} else {
		traders = make([]map[string]any, 0, len(l.Traders))
		for _, t := range slices.Sorted(maps.Keys(l.Traders)) {
			traders = append(traders, TraderView(t, l.Traders[t]))
		}
	}
	return map[string]any{"liveTrading": summary(venueID, l.Venue, len(l.Traders)), "traders": traders}
}

// TraderView is one trader's hold: held or not, and the hold (null when none).
func TraderView(trader string, h *LiveHold) map[string]any {
	var hold any
	if h != nil {
		hold = holdView(h)
	}
	return map[string]any{"trader": trader, "held": h != nil, "hold": hold}
}

func holdView(h *LiveHold) map[string]any {
	return map[string]any{"reason": h.Reason, "heldBy": h.By, "since": h.Since.UTC(), "updatedAt": h.At.UTC()}
}

// Holds is what the live trading gate needs of a venue's holds: an
// immutable copy, taken in the venue's mailbox goroutine.
type Holds struct {
	VenueID string
	Name    string
	OrgID   string
	Firm    string // the venue's firm tenant: its registrations name its traders
	All     *LiveHold
	Traders map[string]LiveHold
}

// HoldsOf is the venue's holds, or nil when it holds nothing.
func HoldsOf(s *State) *Holds {
	if !s.Open || (s.Live.Venue == nil && len(s.Live.Traders) == 0) {
		return nil
	}
	h := &Holds{VenueID: s.ID, Name: s.Name, OrgID: s.OrgID, Firm: s.FirmTenantID, Traders: make(map[string]LiveHold, len(s.Live.Traders))}
	if s.Live.Venue != nil {
		all := *s.Live.Venue
		h.All = &all
	}
	for t, x := range s.Live.Traders {
		h.Traders[t] = *x
	}
	return h
}
