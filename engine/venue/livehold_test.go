package venue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/svc/engine/commands"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/engine/venue"
	"github.com/svc/engine/events"
	evidem "github.com/svc/engine/events/idem"
	evvenue "github.com/svc/engine/events/venue"
)

var (
	asOwner = venuecmd.Actor{Owner: &owner, Email: "owner@example.com"}
	asKey   = venuecmd.Actor{KeyID: "vk_ops"}
)

func hold(trader, reason string, by venuecmd.Actor) *venuecmd.HoldLive {
	return &venuecmd.HoldLive{Trader: trader, Reason: reason, By: by}
}

func release(trader string, by venuecmd.Actor) *venuecmd.ReleaseLive {
	return &venuecmd.ReleaseLive{Trader: trader, By: by}
}

// withKey is an opened venue with a live key vk_ops named "ops" and a revoked one vk_old.
func withKey(t *testing.T) *venue.State {
	s := opened(t)
	for _, c := range []commands.Command{issue(owner, "vk_ops"), issue(owner, "vk_old"), &venuecmd.RevokeKey{KeyID: "vk_old", By: owner}} {
		if k, ok := c.(*venuecmd.IssueKey); ok && k.KeyID == "vk_ops" {
			k.Name = "ops"
		}
		if _, err := decide(t, s, keyed("setup-"+fmt.Sprint(c), "d", c)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// given is withKey after the commands in order, each under its own key.
func given(cs ...commands.Command) func(t *testing.T) *venue.State {
	return func(t *testing.T) *venue.State {
		s := withKey(t)
		for i, c := range cs {
			env := keyed(fmt.Sprintf("given-%d", i), "d", c)
			env.At = t0.Add(time.Duration(i) * time.Minute)
			if _, err := decide(t, s, env); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
}

// answer is the venue's holds a write recorded with its key (liveTrading),
// and the trader's (nil for the venue's scope).
func answer(t *testing.T, evs []events.Event) (venue, trader map[string]any) {
	t.Helper()
	used, ok := evs[len(evs)-1].(evidem.KeyUsed)
	if !ok {
		t.Fatalf("the write recorded no answer: %v", evs)
	}
	var m struct {
		LiveTrading map[string]any `json:"liveTrading"`
		Trader      map[string]any `json:"trader"`
	}
	if err := json.Unmarshal(used.Body, &m); err != nil || m.LiveTrading == nil || used.Status != 200 {
		t.Fatalf("answer %d %s: %v", used.Status, used.Body, err)
	}
	return m.LiveTrading, m.Trader
}

func TestLiveHoldDecisions(t *testing.T) {
	at := t0.Add(time.Hour)
	full := func(t *testing.T) *venue.State {
		s := withKey(t)
		for i := range venuecmd.MaxTraderHolds {
			if _, err := decide(t, s, keyed(fmt.Sprintf("full-%d", i), "d", hold(fmt.Sprintf("t%d@example.com", i), "kyc", asKey))); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	cases := []struct {
		name   string
		given  func(t *testing.T) *venue.State
		cmd    commands.Command
		status int
		code   string
		field  string
		// then checks the events the write recorded (the KeyUsed last) and the state after.
		then func(t *testing.T, s *venue.State, evs []events.Event)
	}{
		{name: "an owner holds the whole venue: who, why, when and the firm that hears of it", given: withKey,
			cmd: hold("", "exchange incident", asOwner),
			then: func(t *testing.T, s *venue.State, evs []events.Event) {
				want := evvenue.LiveHeld{Reason: "exchange incident", By: evvenue.Actor{Kind: "owner", ID: "usr_1", Name: "owner@example.com"}, Firm: "firm_1", At: at}
				if len(evs) != 2 || evs[0] != want {
					t.Fatalf("recorded %v, want %v", evs, want)
				}
				a, tr := answer(t, evs)
				h, _ := a["hold"].(map[string]any)
				if a["held"] != true || h["reason"] != "exchange incident" || h["since"] != at.Format(time.RFC3339) || a["venueId"] != "v1" || tr != nil {
					t.Fatalf("answer %v", a)
				}
				if s.Live.Venue == nil || !s.Live.Venue.Since.Equal(at) {
					t.Fatalf("state %+v", s.Live)
				}
			}},
		{name: "a venue key holds in its own name", given: withKey, cmd: hold("", "compliance review", asKey),
			then: func(t *testing.T, s *venue.State, evs []events.Event) {
				if by := evs[0].(evvenue.LiveHeld).By; by != (evvenue.Actor{Kind: "key", ID: "vk_ops", Name: "ops"}) {
					t.Fatalf("by %+v", by)
				}
			}},
		{name: "the same hold and reason again records nothing and answers it held", given: given(hold("", "incident", asKey)),
			cmd: hold("", "incident", asOwner),
			then: func(t *testing.T, s *venue.State, evs []events.Event) {
				if a, _ := answer(t, evs); len(evs) != 1 || a["held"] != true || s.Live.Venue.By.Kind != "key" {
					t.Fatalf("recorded %v; state %+v", evs, s.Live.Venue)
				}
			}},
		{name: "another reason is recorded; the hold keeps its start", given: given(hold("", "incident", asKey)),
			cmd: hold("", "incident: exchange down", asOwner),
			then: func(t *testing.T, s *venue.State, evs []events.Event) {
				h := s.Live.Venue
				if len(evs) != 2 || h.Reason != "incident: exchange down" || !h.Since.Equal(t0) || !h.At.Equal(at) || h.By.Kind != "owner" {
					t.Fatalf("recorded %v; hold %+v", evs, h)
				}
			}},
		{name: "a release ends the venue's hold and leaves the traders'", given: given(hold("", "incident", asKey), hold("a@example.com", "kyc", asKey)),
			cmd: release("", asOwner),
			then: func(t *testing.T, s *venue.State, evs []events.Event) {
				want := evvenue.LiveReleased{By: evvenue.Actor{Kind: "owner", ID: "usr_1", Name: "owner@example.com"}, Firm: "firm_1", At: at}
				a, _ := answer(t, evs)
				if evs[0] != want || s.Live.Venue != nil || s.Live.Traders["a@example.com"] == nil || a["held"] != false || a["hold"] != nil || a["tradersHeld"] != 1.0 {
					t.Fatalf("recorded %v; answer %v", evs, a)
				}
			}},
		{name: "releasing what is not held records nothing", given: withKey, cmd: release("", asKey),
			then: func(t *testing.T, s *venue.State, evs []events.Event) {
				if a, _ := answer(t, evs); len(evs) != 1 || a["held"] != false {
					t.Fatalf("recorded %v", evs)
				}
			}},
		{name: "a trader is held by the email the venue registered, lower-cased", given: withKey,
			cmd: hold("Trader.One@Example.com", "kyc pending", asKey),
			then: func(t *testing.T, s *venue.State, evs []events.Event) {
				a, tr := answer(t, evs)
				h, _ := tr["hold"].(map[string]any)
				if evs[0].(evvenue.LiveHeld).Trader != "trader.one@example.com" || s.Live.Venue != nil || a["tradersHeld"] != 1.0 ||
					tr["trader"] != "trader.one@example.com" || tr["held"] != true || h["reason"] != "kyc pending" || a["held"] != false {
					t.Fatalf("recorded %v; answer %v", evs, a)
				}
			}},
		{name: "a trader's release ends that trader's hold only", given: given(hold("a@example.com", "kyc", asKey), hold("b@example.com", "kyc", asKey)),
			cmd: release("A@example.com", asKey),
			then: func(t *testing.T, s *venue.State, evs []events.Event) {
				a, tr := answer(t, evs)
				if evs[0].(evvenue.LiveReleased).Trader != "a@example.com" || s.Live.Traders["a@example.com"] != nil || s.Live.Traders["b@example.com"] == nil ||
					tr["held"] != false || tr["hold"] != nil || a["tradersHeld"] != 1.0 {
					t.Fatalf("recorded %v; traders %v", evs, s.Live.Traders)
				}
			}},
		{name: "past the most traders held one by one, a new one is refused", given: full,
			cmd: hold("one-more@example.com", "kyc", asKey), status: 409, code: "live_hold_limit_reached"},
		{name: "at the limit a held trader's reason still changes", given: full, cmd: hold("t7@example.com", "fraud review", asKey),
			then: func(t *testing.T, s *venue.State, evs []events.Event) {
				if len(evs) != 2 || s.Live.Traders["t7@example.com"].Reason != "fraud review" {
					t.Fatalf("recorded %v", evs)
				}
			}},
		{name: "at the limit the whole venue is still held", given: full, cmd: hold("", "incident", asKey),
			then: func(t *testing.T, s *venue.State, evs []events.Event) {
				if s.Live.Venue == nil {
					t.Fatal("not held")
				}
			}},
		{name: "an owner whose email is unverified holds nothing", given: withKey,
			cmd: hold("", "x", venuecmd.Actor{Owner: &venuecmd.Owner{UserID: "u2", Owner: true}}), status: 403, code: "email_unverified"},
		{name: "a revoked key holds nothing", given: withKey, cmd: hold("", "x", venuecmd.Actor{KeyID: "vk_old"}), status: 403, code: "permission_denied"},
		{name: "a key of another venue releases nothing", given: given(hold("", "x", asKey)), cmd: release("", venuecmd.Actor{KeyID: "vk_elsewhere"}),
			status: 403, code: "permission_denied"},
		{name: "a hold needs a reason", given: withKey, cmd: hold("", "", asKey), status: 400, code: "invalid_request", field: "reason"},
		{name: "a reason has no control characters", given: withKey, cmd: hold("", "a\x1b[31m", asKey), status: 400, code: "invalid_request", field: "reason"},
		{name: "a reason is at most 256 characters", given: withKey, cmd: hold("", string(make([]byte, 257)), asKey), status: 400, code: "invalid_request", field: "reason"},
		{name: "a trader is a plain email", given: withKey, cmd: hold("Bob <bob@example.com>", "x", asKey), status: 400, code: "invalid_request", field: "trader"},
		{name: "a release names a trader by a plain email too", given: withKey, cmd: release("not-an-email", asKey), status: 400, code: "invalid_request", field: "trader"},
		{name: "an unknown venue is not found", given: func(*testing.T) *venue.State { return venue.New("v9") }, cmd: hold("", "x", asKey),
			status: 404, code: "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.given(t)
			env := keyed("when", "dw", tc.cmd)
			env.At = at
			evs, err := decide(t, s, env)
			if tc.status != 0 {
				st, code := refusal(err)
				var r *commands.Refusal
				errors.As(err, &r)
				if st != tc.status || code != tc.code || len(evs) != 0 || (tc.field != "" && r.Params["field"] != tc.field) {
					t.Fatalf("got %d %s (%v), events %v", st, code, err, evs)
				}
				if tc.code == "live_hold_limit_reached" && r.Params["limit"] != venuecmd.MaxTraderHolds {
					t.Fatalf("params %v", r.Params)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.then(t, s, evs)
		})
	}
}

// A hold's write is keyed like every venue write: the same key and request
// answer the first answer again and record nothing, another request under
// the key is 409 and records nothing.
func TestLiveHoldIdempotency(t *testing.T) {
	s := withKey(t)
	first, err := decide(t, s, keyed("h-1", "dh", hold("", "incident", asKey)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decide(t, s, keyed("r-1", "dr", release("", asKey))); err != nil {
		t.Fatal(err)
	}
	evs, err := decide(t, s, keyed("h-1", "dh", hold("", "incident", asKey)))
	var replay *commands.Replay
	if !errors.As(err, &replay) || len(evs) != 0 || string(replay.Body) != string(first[len(first)-1].(evidem.KeyUsed).Body) || s.Live.Venue != nil {
		t.Fatalf("replay %v %v; held %v", err, evs, s.Live.Venue)
	}
	evs, err = decide(t, s, keyed("h-1", "other", hold("", "another", asKey)))
	if st, code := refusal(err); st != 409 || code != "idempotency_conflict" || len(evs) != 0 {
		t.Fatalf("got %d %s, events %v", st, code, evs)
	}
}

// HoldsOf is nil for a venue that holds nothing and a copy the venue's
// later commits do not change.
func TestHoldsOf(t *testing.T) {
	s := withKey(t)
	if h := venue.HoldsOf(s); h != nil {
		t.Fatalf("nothing held: %+v", h)
	}
	if _, err := decide(t, s, keyed("a", "d", hold("a@example.com", "kyc", asKey))); err != nil {
		t.Fatal(err)
	}
	h := venue.HoldsOf(s)
	if h == nil || h.All != nil || h.Traders["a@example.com"].Reason != "kyc" || h.Firm != "firm_1" || h.OrgID != "org_1" || h.Name != "Acme" {
		t.Fatalf("holds %+v", h)
	}
	if _, err := decide(t, s, keyed("b", "d", hold("a@example.com", "fraud", asKey))); err != nil {
		t.Fatal(err)
	}
	if _, err := decide(t, s, keyed("c", "d", hold("", "incident", asKey))); err != nil {
		t.Fatal(err)
	}
	if h.Traders["a@example.com"].Reason != "kyc" || h.All != nil {
		t.Fatalf("the copy moved with the venue: %+v", h)
	}
	if _, err := decide(t, s, keyed("d", "d", release("", asKey))); err != nil {
		t.Fatal(err)
	}
	if _, err := decide(t, s, keyed("e", "d", release("a@example.com", asKey))); err != nil {
		t.Fatal(err)
	}
	if h := venue.HoldsOf(s); h != nil {
		t.Fatalf("everything released: %+v", h)
	}
}

// The read lists every trader held one by one, by email, or the one it
// names, held or not.
func TestLiveViewListsTheTraders(t *testing.T) {
	s := given(hold("b@example.com", "kyc", asKey), hold("a@example.com", "fraud review", asKey), hold("", "incident", asKey))(t)
	v := venue.LiveView("v1", s.Live, "")
	sum := v["liveTrading"].(map[string]any)
	ts := v["traders"].([]map[string]any)
	if sum["held"] != true || sum["tradersHeld"] != 2 || len(ts) != 2 || ts[0]["trader"] != "a@example.com" || ts[1]["trader"] != "b@example.com" ||
		ts[0]["hold"].(map[string]any)["reason"] != "fraud review" {
		t.Fatalf("view %v", v)
	}
	one := venue.LiveView("v1", s.Live, "c@example.com")["traders"].([]map[string]any)
	if len(one) != 1 || one[0]["trader"] != "c@example.com" || one[0]["held"] != false || one[0]["hold"] != nil {
		t.Fatalf("one trader %v", one)
	}
}
