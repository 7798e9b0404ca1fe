package connect_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	connectcmd "github.com/svc/engine/commands/connect"
	"github.com/svc/engine/engine/connect"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/events"
	evconnect "github.com/svc/engine/events/connect"
	evidem "github.com/svc/engine/events/idem"
)

var (
	t0      = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	expires = t0.Add(connectcmd.LinkLife)
	owner   = connectcmd.Owner{UserID: "usr_1", Verified: true, Owner: true}
)

func keyed(at time.Time, key, digest string, c commands.Command) commands.Envelope {
	return commands.Envelope{ID: ulid.Make(), At: at, Key: key, Digest: digest, Cmd: c}
}

func plain(at time.Time, c commands.Command) commands.Envelope {
	return commands.Envelope{ID: ulid.Make(), At: at, Cmd: c}
}

func refusal(err error) (int, string, map[string]any) {
	var r *commands.Refusal
	if errors.As(err, &r) {
		return commands.StatusOf(r.Code, r.Malformed), string(r.Code), r.Params
	}
	return 0, "", nil
}

// types names the events of evs, KeyUsed included, in order.
func types(evs []events.Event) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.Type())
	}
	return out
}

// answer is the answer a keyed write recorded in its KeyUsed (the last event).
func answer(t *testing.T, evs []events.Event) (int, []byte, map[string]any) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("a keyed write committed nothing")
	}
	used, ok := evs[len(evs)-1].(evidem.KeyUsed)
	if !ok {
		t.Fatalf("a keyed write's last event is %T, not KeyUsed", evs[len(evs)-1])
	}
	var m map[string]any
	if err := json.Unmarshal(used.Body, &m); err != nil {
		t.Fatalf("answer %s: %v", used.Body, err)
	}
	return used.Status, used.Body, m
}

// linkOf is the link of a keyed answer, as JSON.
func linkOf(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	l, ok := m["link"].(map[string]any)
	if !ok {
		t.Fatalf("answer without a link: %v", m)
	}
	return l
}

var (
	keyUsed   = evidem.KeyUsed{}.Type()
	mounted   = evconnect.LinkMounted{}.Type()
	connected = evconnect.LinkConnected{}.Type()
	closed    = evconnect.LinkClosed{}.Type()
	failed    = evconnect.LinkFailed{}.Type()
	dropped   = evconnect.LinkDisconnected{}.Type()
)

// decideLink validates and decides env on s and folds the events into s, as the mailbox does.
func decideLink(t *testing.T, s *connect.Link, env commands.Envelope) ([]events.Event, error) {
	t.Helper()
	if err := env.Cmd.Validate(); err != nil {
		return nil, err
	}
	evs, err := connect.DecideLink(s, env)
	for _, e := range evs {
		connect.ApplyLink(s, e)
	}
	return evs, err
}

func createLink(at time.Time, key, digest, trader string) commands.Envelope {
	return keyed(at, key, digest, &connectcmd.CreateLink{Trader: trader, AppID: "app_1", KeyID: "ck_1", ExpiresAt: at.Add(connectcmd.LinkLife)})
}

func mount(at time.Time) commands.Envelope { return plain(at, &connectcmd.MountLink{}) }

func connectTo(at time.Time, account string) commands.Envelope {
	return plain(at, &connectcmd.ConnectLink{AccountID: account})
}

func disconnect(at time.Time, account string) commands.Envelope {
	return plain(at, &connectcmd.DisconnectLink{AccountID: account, By: "hosted"})
}

func closeLink(at time.Time, key, digest string) commands.Envelope {
	return keyed(at, key, digest, &connectcmd.CloseLink{})
}

// The steps of the table: each at a minute after the one before.
var (
	create = createLink(t0, "k-create", "d-create", "trader-1")
	mount1 = mount(t0.Add(time.Minute))
	conn1  = connectTo(t0.Add(2*time.Minute), "acct_1")
	close1 = closeLink(t0.Add(3*time.Minute), "k-close", "d-close")
)

func TestLinkDecisions(t *testing.T) {
	later := t0.Add(10 * time.Minute)
	cases := []struct {
		name  string
		given []commands.Envelope
		when  commands.Envelope
		// then: a refusal (status, code), a replay (replay), or the events
		// committed (KeyUsed included), the state after them and, for a keyed
		// write, its answer's link.
		status int
		code   string
		replay bool
		events []string
		state  string
		check  func(t *testing.T, s *connect.Link, evs []events.Event)
	}{
		{name: "create makes a created link", when: create, events: []string{evconnect.LinkCreated{}.Type(), keyUsed}, state: evconnect.StateCreated,
			check: func(t *testing.T, s *connect.Link, evs []events.Event) {
				st, _, m := answer(t, evs)
				l := linkOf(t, m)
				if st != 201 || l["state"] != "created" || l["trader"] != "trader-1" || l["result"] != nil || l["id"] != "lnk_1" ||
					l["expiresAt"] != expires.Format(time.RFC3339) || !s.ExpiresAt.Equal(expires) || s.AppID != "app_1" || s.KeyID != "ck_1" {
					t.Fatalf("%d %v, state %+v", st, l, s.Link)
				}
			}},
		{name: "create with the same key and digest replays", given: []commands.Envelope{create},
			when: createLink(later, "k-create", "d-create", "trader-1"), replay: true, state: evconnect.StateCreated},
		{name: "create with the same key and another digest conflicts", given: []commands.Envelope{create},
			when: createLink(later, "k-create", "d-other", "trader-2"), status: 409, code: "idempotency_conflict", state: evconnect.StateCreated},
		{name: "create of a link that exists with another key conflicts", given: []commands.Envelope{create},
			when: createLink(later, "k-other", "d-other", "trader-1"), status: 409, code: "idempotency_conflict", state: evconnect.StateCreated},

		{name: "created --mount--> mounted", given: []commands.Envelope{create}, when: mount1, events: []string{mounted}, state: evconnect.StateMounted},
		{name: "mount of a mounted link changes nothing", given: []commands.Envelope{create, mount1}, when: mount(later), events: []string{}, state: evconnect.StateMounted},
		{name: "mounted --connect--> connected, result accountId", given: []commands.Envelope{create, mount1}, when: conn1,
			events: []string{connected}, state: evconnect.StateConnected,
			check: func(t *testing.T, s *connect.Link, _ []events.Event) {
				v := connectcmd.ViewLink(s.Link, later)
				want := map[string]any{"status": "connected", "accountId": "acct_1"}
				if !reflect.DeepEqual(v.Result, want) || s.AccountID != "acct_1" || !v.UpdatedAt.Equal(conn1.At) {
					t.Fatalf("view %+v", v)
				}
			}},

		{name: "created --close--> closed", given: []commands.Envelope{create}, when: close1, events: []string{closed, keyUsed}, state: evconnect.StateClosed,
			check: func(t *testing.T, s *connect.Link, evs []events.Event) {
				st, _, m := answer(t, evs)
				l := linkOf(t, m)
				if st != 200 || l["state"] != "closed" || !reflect.DeepEqual(l["result"], map[string]any{"status": "closed"}) {
					t.Fatalf("%d %v", st, l)
				}
			}},
		{name: "mounted --close--> closed", given: []commands.Envelope{create, mount1}, when: close1, events: []string{closed, keyUsed}, state: evconnect.StateClosed},
		{name: "connected --close--> connected: no change, the link as it stands", given: []commands.Envelope{create, mount1, conn1}, when: close1,
			events: []string{keyUsed}, state: evconnect.StateConnected,
			check: func(t *testing.T, s *connect.Link, evs []events.Event) {
				st, _, m := answer(t, evs)
				l := linkOf(t, m)
				if st != 200 || l["state"] != "connected" || !reflect.DeepEqual(l["result"], map[string]any{"status": "connected", "accountId": "acct_1"}) {
					t.Fatalf("%d %v", st, l)
				}
			}},
		{name: "close twice with the same key replays the first answer", given: []commands.Envelope{create, close1},
			when: closeLink(later, "k-close", "d-close"), replay: true, state: evconnect.StateClosed},
		{name: "close twice with the same key and another body conflicts", given: []commands.Envelope{create, close1},
			when: closeLink(later, "k-close", "d-other"), status: 409, code: "idempotency_conflict", state: evconnect.StateClosed},
		{name: "close twice with a new key commits no change and answers closed", given: []commands.Envelope{create, close1},
			when: closeLink(later, "k-close-2", "d-close-2"), events: []string{keyUsed}, state: evconnect.StateClosed,
			check: func(t *testing.T, s *connect.Link, evs []events.Event) {
				st, _, m := answer(t, evs)
				l := linkOf(t, m)
				if st != 200 || l["state"] != "closed" || !s.UpdatedAt.Equal(close1.At) {
					t.Fatalf("%d %v, updated %v", st, l, s.UpdatedAt)
				}
			}},

		{name: "mount of a closed link is gone", given: []commands.Envelope{create, close1}, when: mount(later), status: 410, code: "link_closed", state: evconnect.StateClosed},
		{name: "connect of a closed link is gone", given: []commands.Envelope{create, mount1, close1}, when: connectTo(later, "acct_1"),
			status: 410, code: "link_closed", state: evconnect.StateClosed},
		{name: "mount of a connected link conflicts", given: []commands.Envelope{create, mount1, conn1}, when: mount(later),
			status: 409, code: "link_connected", state: evconnect.StateConnected},
		{name: "connect of a connected link with the same account changes nothing", given: []commands.Envelope{create, mount1, conn1},
			when: connectTo(later, "acct_1"), events: []string{}, state: evconnect.StateConnected},
		{name: "connect of a connected link with another account conflicts", given: []commands.Envelope{create, mount1, conn1},
			when: connectTo(later, "acct_2"), status: 409, code: "link_connected", state: evconnect.StateConnected},
		{name: "connect of a connected link after its expiry with the same account changes nothing", given: []commands.Envelope{create, mount1, conn1},
			when: connectTo(expires.Add(time.Hour), "acct_1"), events: []string{}, state: evconnect.StateConnected},

		{name: "mount of an expired link (at expiresAt) is gone", given: []commands.Envelope{create}, when: mount(expires),
			status: 410, code: "link_expired", state: evconnect.StateCreated,
			check: func(t *testing.T, s *connect.Link, _ []events.Event) {
				v := connectcmd.ViewLink(s.Link, expires)
				if v.State != "failed" || !reflect.DeepEqual(v.Result, map[string]any{"status": "failed", "reason": "expired"}) || !v.UpdatedAt.Equal(expires) {
					t.Fatalf("view at expiresAt %+v", v)
				}
				if v := connectcmd.ViewLink(s.Link, expires.Add(-time.Nanosecond)); v.State != "created" || v.Result != nil {
					t.Fatalf("view just before expiresAt %+v", v)
				}
			}},
		{name: "connect of an expired mounted link is gone", given: []commands.Envelope{create, mount1}, when: connectTo(expires.Add(time.Second), "acct_1"),
			status: 410, code: "link_expired", state: evconnect.StateMounted},
		{name: "close of an expired link records it failed and answers failed", given: []commands.Envelope{create, mount1},
			when: closeLink(expires.Add(time.Minute), "k-close", "d-close"), events: []string{failed, keyUsed}, state: evconnect.StateFailed,
			check: func(t *testing.T, s *connect.Link, evs []events.Event) {
				if f := evs[0].(evconnect.LinkFailed); f.Reason != "expired" || !f.At.Equal(expires) {
					t.Fatalf("failed %+v", f)
				}
				st, _, m := answer(t, evs)
				l := linkOf(t, m)
				if st != 200 || l["state"] != "failed" || !reflect.DeepEqual(l["result"], map[string]any{"status": "failed", "reason": "expired"}) {
					t.Fatalf("%d %v", st, l)
				}
				if s.Reason != "expired" || !s.UpdatedAt.Equal(expires) {
					t.Fatalf("state %+v", s.Link)
				}
			}},
		{name: "mount of a failed link is gone as expired", given: []commands.Envelope{create, closeLink(expires, "k-close", "d-close")},
			when: mount(expires.Add(time.Minute)), status: 410, code: "link_expired", state: evconnect.StateFailed},

		{name: "connected --disconnect--> closed, result disconnected with the account", given: []commands.Envelope{create, mount1, conn1},
			when: disconnect(later, "acct_1"), events: []string{dropped}, state: evconnect.StateClosed,
			check: func(t *testing.T, s *connect.Link, _ []events.Event) {
				v := connectcmd.ViewLink(s.Link, later)
				want := map[string]any{"status": "disconnected", "accountId": "acct_1"}
				if v.State != "closed" || !reflect.DeepEqual(v.Result, want) || !s.Disconnected || !v.UpdatedAt.Equal(later) {
					t.Fatalf("view %+v, state %+v", v, s.Link)
				}
				// Past its token's expiry it still reads disconnected, never failed.
				if v := connectcmd.ViewLink(s.Link, expires.Add(time.Hour)); v.State != "closed" || !reflect.DeepEqual(v.Result, want) {
					t.Fatalf("view after expiry %+v", v)
				}
			}},
		{name: "disconnect twice changes nothing", given: []commands.Envelope{create, mount1, conn1, disconnect(t0.Add(3*time.Minute), "acct_1")},
			when: disconnect(later.Add(time.Minute), "acct_1"), events: []string{}, state: evconnect.StateClosed},
		{name: "disconnect of another account than the link's changes nothing", given: []commands.Envelope{create, mount1, conn1},
			when: disconnect(later, "acct_2"), events: []string{}, state: evconnect.StateConnected},
		{name: "disconnect of a link not connected changes nothing", given: []commands.Envelope{create, mount1},
			when: disconnect(later, "acct_1"), events: []string{}, state: evconnect.StateMounted},
		{name: "connect of a disconnected link is gone", given: []commands.Envelope{create, mount1, conn1, disconnect(t0.Add(3*time.Minute), "acct_1")},
			when: connectTo(later.Add(time.Minute), "acct_1"), status: 410, code: "link_closed", state: evconnect.StateClosed},
		{name: "close of a disconnected link changes nothing and answers it disconnected", given: []commands.Envelope{create, mount1, conn1, disconnect(t0.Add(3*time.Minute), "acct_1")},
			when: closeLink(later.Add(time.Minute), "k-close", "d-close"), events: []string{keyUsed}, state: evconnect.StateClosed,
			check: func(t *testing.T, s *connect.Link, evs []events.Event) {
				_, _, m := answer(t, evs)
				if l := linkOf(t, m); l["state"] != "closed" || l["result"].(map[string]any)["status"] != "disconnected" {
					t.Fatalf("%v", l)
				}
			}},
		{name: "disconnect of a link never created is not found", when: disconnect(later, "acct_1"), status: 404, code: "not_found"},

		{name: "mount of a link never created is not found", when: mount(later), status: 404, code: "not_found"},
		{name: "connect of a link never created is not found", when: connectTo(later, "acct_1"), status: 404, code: "not_found"},
		{name: "close of a link never created is not found", when: closeLink(later, "k", "d"), status: 404, code: "not_found"},
		{name: "a keyed write without a key is a programming error, never a commit", given: []commands.Envelope{create},
			when: plain(later, &connectcmd.CloseLink{}), status: -1, state: evconnect.StateCreated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := connect.NewLink("lnk_1")
			var first []byte // the answer of the last keyed step, for a replay
			for i, env := range tc.given {
				evs, err := decideLink(t, s, env)
				if err != nil {
					t.Fatalf("given %d (%T): %v", i, env.Cmd, err)
				}
				if env.Key != "" {
					_, first, _ = answer(t, evs)
				}
			}
			before := *s
			evs, err := decideLink(t, s, tc.when)
			var replay *commands.Replay
			switch {
			case tc.status == -1:
				if err == nil || len(evs) != 0 {
					t.Fatalf("committed %v (%v)", types(evs), err)
				}
			case tc.status != 0:
				if st, code, _ := refusal(err); st != tc.status || code != tc.code || len(evs) != 0 {
					t.Fatalf("got %d %s (%v), events %v", st, code, err, types(evs))
				}
			case tc.replay:
				if !errors.As(err, &replay) || len(evs) != 0 || !bytes.Equal(replay.Body, first) {
					t.Fatalf("want a replay of %s, got %v, events %v", first, err, types(evs))
				}
			case err != nil:
				t.Fatal(err)
			default:
				if got := types(evs); !reflect.DeepEqual(got, tc.events) {
					t.Fatalf("events %v, want %v", got, tc.events)
				}
			}
			if s.State != tc.state {
				t.Fatalf("state %q, want %q", s.State, tc.state)
			}
			if (tc.status != 0 || tc.replay || len(tc.events) == 0) && !reflect.DeepEqual(before.Link, s.Link) {
				t.Fatalf("the link moved without an event: %+v -> %+v", before.Link, s.Link)
			}
			if tc.check != nil {
				tc.check(t, s, evs)
			}
		})
	}
}

// decideApp validates and decides env on s and folds the events into s.
func decideApp(t *testing.T, s *connect.App, env commands.Envelope) ([]events.Event, error) {
	t.Helper()
	if err := env.Cmd.Validate(); err != nil {
		return nil, err
	}
	evs, err := connect.DecideApp(s, env)
	for _, e := range evs {
		connect.ApplyApp(s, e)
	}
	return evs, err
}

func settings(name string, websites ...string) evconnect.Settings {
	return evconnect.Settings{Name: name, Websites: websites, WhiteLabel: connectcmd.DefaultWhiteLabel()}
}

func createApp(by connectcmd.Owner) *connectcmd.CreateApp {
	return &connectcmd.CreateApp{OrgID: "org_1", Settings: settings("Acme", "https://app.example.com"), TenantID: "capp_1", Env: "sandbox", By: by}
}

func issueKey(n int, expiresAt time.Time) *connectcmd.IssueKey {
	id := fmt.Sprintf("ck_%d", n)
	return &connectcmd.IssueKey{KeyID: id, Digest: "dg-" + id, Prefix: "svc_ck_sandbox_abcd", Env: "sandbox", Name: "ci",
		ExpiresAt: expiresAt, Now: t0, By: owner}
}

// openApp is an app created by a verified owner, with n keys issued (each for a day).
func openApp(t *testing.T, n int) *connect.App {
	t.Helper()
	s := connect.NewApp("app_1")
	if _, err := decideApp(t, s, keyed(t0, "k-app", "d-app", createApp(owner))); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := decideApp(t, s, keyed(t0, fmt.Sprintf("k-key-%d", i), fmt.Sprintf("d-key-%d", i), issueKey(i, t0.Add(24*time.Hour)))); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	return s
}

func TestAppDecisions(t *testing.T) {
	later := t0.Add(time.Minute)
	cases := []struct {
		name   string
		given  func(t *testing.T) *connect.App
		when   commands.Envelope
		status int
		code   string
		replay int // the replayed status
		events []string
		check  func(t *testing.T, s *connect.App, evs []events.Event)
	}{
		{name: "a verified owner creates an app: 201", given: func(*testing.T) *connect.App { return connect.NewApp("app_1") },
			when: keyed(t0, "k-app", "d-app", createApp(owner)), events: []string{evconnect.AppCreated{}.Type(), keyUsed},
			check: func(t *testing.T, s *connect.App, evs []events.Event) {
				st, _, m := answer(t, evs)
				app, _ := m["app"].(map[string]any)
				if st != 201 || app["id"] != "app_1" || app["name"] != "Acme" || app["createdBy"] != "usr_1" || !s.Open || s.Created.TenantID != "capp_1" {
					t.Fatalf("%d %v, state %+v", st, m, s)
				}
			}},
		{name: "an unverified owner creates none", given: func(*testing.T) *connect.App { return connect.NewApp("app_1") },
			when: keyed(t0, "k-app", "d-app", createApp(connectcmd.Owner{UserID: "usr_1", Owner: true})), status: 403, code: "email_unverified"},
		{name: "a member who is not an owner creates none", given: func(*testing.T) *connect.App { return connect.NewApp("app_1") },
			when: keyed(t0, "k-app", "d-app", createApp(connectcmd.Owner{UserID: "usr_2", Verified: true})), status: 403, code: "permission_denied"},
		{name: "create with the same key and digest replays", given: func(t *testing.T) *connect.App { return openApp(t, 0) },
			when: keyed(later, "k-app", "d-app", createApp(owner)), replay: 201},
		{name: "create with the same key and another digest conflicts", given: func(t *testing.T) *connect.App { return openApp(t, 0) },
			when: keyed(later, "k-app", "d-other", createApp(owner)), status: 409, code: "idempotency_conflict"},
		{name: "commands on an app never created are not found", given: func(*testing.T) *connect.App { return connect.NewApp("app_1") },
			when: keyed(later, "k-key", "d-key", issueKey(1, t0.Add(time.Hour))), status: 404, code: "not_found"},

		{name: "update replaces the settings", given: func(t *testing.T) *connect.App { return openApp(t, 0) },
			when: keyed(later, "k-upd", "d-upd", &connectcmd.UpdateApp{Settings: evconnect.Settings{Name: "Acme 2", LogoURL: "https://cdn.example.com/l.png",
				Websites: []string{"https://B.example.com/", "http://localhost:3000"}}, By: owner}),
			events: []string{evconnect.AppUpdated{}.Type(), keyUsed},
			check: func(t *testing.T, s *connect.App, evs []events.Event) {
				want := evconnect.Settings{Name: "Acme 2", LogoURL: "https://cdn.example.com/l.png", Websites: []string{"https://b.example.com", "http://localhost:3000"},
					WhiteLabel: evconnect.WhiteLabel{Label: "Paper", Currency: "USD", StartingBalance: events.Int(50000)}}
				if d := enginetest.Diff(want, s.Current); len(d) > 0 || !s.UpdatedAt.Equal(later) || s.Created.Settings.Name != "Acme" {
					t.Fatalf("settings %v %v", d, s.UpdatedAt)
				}
				if st, _, m := answer(t, evs); st != 200 || m["app"].(map[string]any)["name"] != "Acme 2" {
					t.Fatalf("%d %v", st, m)
				}
			}},
		{name: "update needs an owner", given: func(t *testing.T) *connect.App { return openApp(t, 0) },
			when:   keyed(later, "k-upd", "d-upd", &connectcmd.UpdateApp{Settings: settings("Acme 2", "https://b.example.com"), By: connectcmd.Owner{UserID: "usr_2", Verified: true}}),
			status: 403, code: "permission_denied"},

		{name: "an owner issues a key; the answer has no secret", given: func(t *testing.T) *connect.App { return openApp(t, 0) },
			when: keyed(later, "k-key", "d-key", issueKey(1, t0.Add(time.Hour))), events: []string{evconnect.KeyIssued{}.Type(), keyUsed},
			check: func(t *testing.T, s *connect.App, evs []events.Event) {
				st, body, m := answer(t, evs)
				if k := s.Keys["ck_1"]; k == nil || k.Digest != "dg-ck_1" || st != 201 || m["secret"] != nil || bytes.Contains(body, []byte("dg-ck_1")) {
					t.Fatalf("key %+v answer %d %s", k, st, body)
				}
			}},
		{name: "the key after MaxKeys live keys is refused", given: func(t *testing.T) *connect.App { return openApp(t, connectcmd.MaxKeys) },
			when: keyed(later, "k-key", "d-key", issueKey(99, t0.Add(time.Hour))), status: 409, code: "key_limit_reached",
			check: func(t *testing.T, s *connect.App, _ []events.Event) {
				if len(s.Keys) != connectcmd.MaxKeys {
					t.Fatalf("%d keys", len(s.Keys))
				}
			}},
		{name: "expired keys do not count towards MaxKeys", given: func(t *testing.T) *connect.App {
			s := openApp(t, connectcmd.MaxKeys-1)
			if _, err := decideApp(t, s, keyed(t0, "k-short", "d-short", issueKey(50, t0.Add(time.Minute)))); err != nil {
				t.Fatal(err)
			}
			return s
		}, when: keyed(t0.Add(time.Minute), "k-key", "d-key", issueKey(99, t0.Add(time.Hour))), events: []string{evconnect.KeyIssued{}.Type(), keyUsed}},
		{name: "revoked keys do not count towards MaxKeys", given: func(t *testing.T) *connect.App {
			s := openApp(t, connectcmd.MaxKeys)
			if _, err := decideApp(t, s, keyed(later, "k-rev", "d-rev", &connectcmd.RevokeKey{KeyID: "ck_3", By: owner})); err != nil {
				t.Fatal(err)
			}
			return s
		}, when: keyed(later, "k-key", "d-key", issueKey(99, t0.Add(time.Hour))), events: []string{evconnect.KeyIssued{}.Type(), keyUsed}},
		{name: "issue needs a verified owner", given: func(t *testing.T) *connect.App { return openApp(t, 0) },
			when: keyed(later, "k-key", "d-key", func() *connectcmd.IssueKey {
				c := issueKey(1, t0.Add(time.Hour))
				c.By.Verified = false
				return c
			}()), status: 403, code: "email_unverified"},

		{name: "revoke records KeyRevoked", given: func(t *testing.T) *connect.App { return openApp(t, 1) },
			when: keyed(later, "k-rev", "d-rev", &connectcmd.RevokeKey{KeyID: "ck_0", By: owner}), events: []string{evconnect.KeyRevoked{}.Type(), keyUsed},
			check: func(t *testing.T, s *connect.App, evs []events.Event) {
				st, _, m := answer(t, evs)
				if !s.Keys["ck_0"].Revoked || st != 200 || m["key"].(map[string]any)["revoked"] != true {
					t.Fatalf("%d %v", st, m)
				}
			}},
		{name: "revoke twice records no second revocation", given: func(t *testing.T) *connect.App {
			s := openApp(t, 1)
			if _, err := decideApp(t, s, keyed(later, "k-rev", "d-rev", &connectcmd.RevokeKey{KeyID: "ck_0", By: owner})); err != nil {
				t.Fatal(err)
			}
			return s
		}, when: keyed(later, "k-rev-2", "d-rev-2", &connectcmd.RevokeKey{KeyID: "ck_0", By: owner}), events: []string{keyUsed},
			check: func(t *testing.T, s *connect.App, evs []events.Event) {
				if st, _, m := answer(t, evs); st != 200 || m["key"].(map[string]any)["revoked"] != true {
					t.Fatalf("%d %v", st, m)
				}
			}},
		{name: "revoke of an unknown key is not found", given: func(t *testing.T) *connect.App { return openApp(t, 1) },
			when: keyed(later, "k-rev", "d-rev", &connectcmd.RevokeKey{KeyID: "ck_9", By: owner}), status: 404, code: "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.given(t)
			keys := len(s.Keys)
			evs, err := decideApp(t, s, tc.when)
			var replay *commands.Replay
			switch {
			case tc.status != 0:
				if st, code, _ := refusal(err); st != tc.status || code != tc.code || len(evs) != 0 || len(s.Keys) != keys {
					t.Fatalf("got %d %s (%v), events %v", st, code, err, types(evs))
				}
			case tc.replay != 0:
				if !errors.As(err, &replay) || replay.Status != tc.replay || len(evs) != 0 {
					t.Fatalf("want a replay, got %v, events %v", err, types(evs))
				}
			case err != nil:
				t.Fatal(err)
			default:
				if got := types(evs); !reflect.DeepEqual(got, tc.events) {
					t.Fatalf("events %v, want %v", got, tc.events)
				}
			}
			if tc.check != nil {
				tc.check(t, s, evs)
			}
		})
	}
}

func TestStatementRedeemsOnce(t *testing.T) {
	s := connect.NewStatement("jti-1")
	redeem := &connectcmd.RedeemStatement{ID: "jti-1", Email: "dev@example.com", Expires: t0.Add(5 * time.Minute)}
	if err := redeem.Validate(); err != nil {
		t.Fatal(err)
	}
	evs, err := connect.DecideStatement(s, plain(t0, redeem))
	if err != nil {
		t.Fatal(err)
	}
	want := []events.Event{evconnect.StatementRedeemed{ID: "jti-1", Email: "dev@example.com", Expires: t0.Add(5 * time.Minute), At: t0}}
	if !reflect.DeepEqual(evs, want) {
		t.Fatalf("events %+v", evs)
	}
	for _, e := range evs {
		connect.ApplyStatement(s, e)
	}
	evs, err = connect.DecideStatement(s, plain(t0.Add(time.Second), redeem))
	if st, code, params := refusal(err); st != 401 || code != "invalid_statement" || params["reason"] != "replayed" || len(evs) != 0 {
		t.Fatalf("second redemption: %d %s %v (%v), events %v", st, code, params, err, types(evs))
	}
}

// TestReplayRebuildsTheSameState drives each aggregate through every event
// it records and checks that replay(log) == live state in both encodings.
func TestReplayRebuildsTheSameState(t *testing.T) {
	reg := events.Merge(evconnect.Registry(), evidem.Registry())
	seen := map[string]bool{}
	note := func(evs []events.Event) {
		for _, e := range evs {
			seen[e.Type()] = true
		}
	}

	app := enginetest.NewReplay(t, enginetest.Core[*connect.App]{New: func() *connect.App { return connect.NewApp("app_1") },
		Decide: connect.DecideApp, Apply: connect.ApplyApp, Registry: reg})
	note(app.Do(keyed(t0, "k0", "d0", createApp(owner))))
	note(app.Do(keyed(t0, "k1", "d1", issueKey(1, t0.Add(time.Hour)))))
	note(app.Do(keyed(t0, "k2", "d2", &connectcmd.UpdateApp{Settings: settings("Acme 2", "https://b.example.com"), By: owner})))
	note(app.Do(keyed(t0, "k3", "d3", &connectcmd.RevokeKey{KeyID: "ck_1", By: owner})))
	app.Check()

	for _, script := range [][]commands.Envelope{
		{create, mount1, conn1, close1},
		{create, close1, closeLink(expires, "k-close-2", "d-close-2")},
		{create, mount1, closeLink(expires, "k-close", "d-close")},
		{create, mount1, conn1, disconnect(t0.Add(3*time.Minute), "acct_1")},
	} {
		link := enginetest.NewReplay(t, enginetest.Core[*connect.Link]{New: func() *connect.Link { return connect.NewLink("lnk_1") },
			Decide: connect.DecideLink, Apply: connect.ApplyLink, Registry: reg})
		for _, env := range script {
			note(link.Do(env))
		}
		link.Check()
	}

	stmt := enginetest.NewReplay(t, enginetest.Core[*connect.Statement]{New: func() *connect.Statement { return connect.NewStatement("jti-1") },
		Decide: connect.DecideStatement, Apply: connect.ApplyStatement, Registry: reg})
	note(stmt.Do(plain(t0, &connectcmd.RedeemStatement{ID: "jti-1", Email: "dev@example.com", Expires: t0.Add(time.Minute)})))
	stmt.Check()

	for name := range reg {
		if !seen[name] {
			t.Errorf("the scripts record no %s", name)
		}
	}
}
