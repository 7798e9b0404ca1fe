package org_test

import (
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	orgcmd "github.com/svc/engine/commands/org"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/org"
	evorg "github.com/svc/engine/events/org"
)

var (
	t0    = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ann   = orgcmd.Actor{UserID: "usr_ann", Email: "ann@example.com", Verified: true}
	bob   = orgcmd.Actor{UserID: "usr_bob", Email: "bob@example.com", Verified: true}
	carl  = orgcmd.Actor{UserID: "usr_carl", Email: "carl@example.com"} // unverified
	setup = &orgcmd.Create{Name: "Desk", By: ann, Digest: "d1"}
)

func run(t *testing.T, cmds ...commands.Command) (*org.State, error) {
	t.Helper()
	s := org.New("org_1")
	var err error
	for i, c := range cmds {
		if verr := c.Validate(); verr != nil {
			t.Fatalf("%T: %v", c, verr)
		}
		var evs []interface{ Type() string }
		got, derr := org.Decide(s, commands.Envelope{ID: ulid.Make(), At: t0, Cmd: c})
		if derr != nil && i < len(cmds)-1 {
			t.Fatalf("command %d %T refused: %v", i, c, derr)
		}
		err = derr
		for _, e := range got {
			evs = append(evs, e)
			s = org.Apply(s, e)
		}
		if derr != nil && len(evs) > 0 {
			t.Fatalf("a refusal recorded %d events", len(evs))
		}
	}
	return s, err
}

func code(err error) string {
	var r *commands.Refusal
	if errors.As(err, &r) {
		return string(r.Code)
	}
	return ""
}

func TestOrgRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmds []commands.Command
		want string
	}{
		{"an unverified user creates none", []commands.Command{&orgcmd.Create{Name: "X", By: carl}}, "email_unverified"},
		{"the same key with another body", []commands.Command{setup, &orgcmd.Create{Name: "Other", By: ann, Digest: "d2"}}, "idempotency_conflict"},
		{"a member does not invite", []commands.Command{setup, &orgcmd.Invite{Email: bob.Email, Role: "member", By: ann},
			&orgcmd.Accept{By: bob}, &orgcmd.Invite{Email: "x@example.com", Role: "member", By: bob}}, "permission_denied"},
		{"an outsider invites into nothing", []commands.Command{setup, &orgcmd.Invite{Email: "x@example.com", Role: "reader", By: bob}}, "not_found"},
		{"accepting without an invitation", []commands.Command{setup, &orgcmd.Accept{By: bob}}, "not_found"},
		{"an unverified invitee", []commands.Command{setup, &orgcmd.Invite{Email: carl.Email, Role: "member", By: ann}, &orgcmd.Accept{By: carl}}, "email_unverified"},
		{"inviting a member", []commands.Command{setup, &orgcmd.Invite{Email: "ANN@example.com", Role: "reader", By: ann}}, "already_member"},
		{"the last owner leaves", []commands.Command{setup, &orgcmd.Remove{UserID: ann.UserID, By: ann}}, "last_owner"},
		{"a member removes another", []commands.Command{setup, &orgcmd.Invite{Email: bob.Email, Role: "member", By: ann}, &orgcmd.Accept{By: bob},
			&orgcmd.Remove{UserID: ann.UserID, By: bob}}, "permission_denied"},
		{"a command on no organization", []commands.Command{&orgcmd.Accept{By: bob}}, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := run(t, tc.cmds...); code(err) != tc.want {
				t.Fatalf("got %v (%q), want %s", err, code(err), tc.want)
			}
		})
	}
}

func TestOrgTransitions(t *testing.T) {
	s, err := run(t, setup, setup, // the same key and body: nothing more
		&orgcmd.Invite{Email: "Bob@Example.com", Role: "owner", By: ann}, &orgcmd.Accept{By: bob}, &orgcmd.Accept{By: bob},
		&orgcmd.Remove{UserID: ann.UserID, By: ann}) // another owner remains: ann may leave
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Members) != 1 || s.Role(bob.UserID) != "owner" || len(s.Invites) != 0 {
		t.Fatalf("state %+v", s)
	}
	s, err = run(t, setup, &orgcmd.Invite{Email: "x@example.com", Role: "reader", By: ann}, &orgcmd.Withdraw{Email: "x@example.com", By: ann})
	if err != nil || len(s.Invites) != 0 {
		t.Fatalf("withdraw: %v %+v", err, s)
	}
}

func TestOrgReplayRebuildsTheSameState(t *testing.T) {
	r := enginetest.NewReplay(t, enginetest.Core[*org.State]{New: func() *org.State { return org.New("org_1") },
		Decide: org.Decide, Apply: org.Apply, Registry: evorg.Registry()})
	seen := map[string]bool{}
	for _, c := range []commands.Command{setup, &orgcmd.Invite{Email: bob.Email, Role: "member", By: ann}, &orgcmd.Accept{By: bob},
		&orgcmd.Invite{Email: "x@example.com", Role: "reader", By: ann}, &orgcmd.Withdraw{Email: "x@example.com", By: ann},
		&orgcmd.Remove{UserID: bob.UserID, By: ann}} {
		for _, e := range r.Do(commands.Envelope{ID: ulid.Make(), At: t0, Cmd: c}) {
			seen[e.Type()] = true
		}
	}
	for name := range evorg.Registry() {
		if !seen[name] {
			t.Errorf("the script records no %s", name)
		}
	}
	r.Check()
}
