package challenge_test

import (
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	challengecmd "github.com/svc/engine/commands/challenge"
	"github.com/svc/engine/engine/challenge"
	"github.com/svc/engine/events"
	evch "github.com/svc/engine/events/challenge"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

const (
	stage1 = "5e1d0c6a-0001-4c00-8000-0000000000a1"
	stage2 = "5e1d0c6a-0002-4c00-8000-0000000000a2"
)

func keyed(key string, c commands.Command) commands.Envelope {
	return commands.Envelope{ID: ulid.Make(), At: t0, Key: key, Digest: "d-" + key, Cmd: c}
}

func refusal(err error) (int, string, any) {
	var r *commands.Refusal
	if errors.As(err, &r) {
		return commands.StatusOf(r.Code, r.Malformed), string(r.Code), r.Params["field"]
	}
	return 0, "", nil
}

func program(id, next string) evch.Program {
	return evch.Program{ID: id, Name: "P", IsActive: true, Stage: 1, NextChallengeID: next, AllowedTypes: []string{"standard"},
		AccountSizes: []events.Decimal{events.Int(10000)}, Currency: "USD", DDMode: evch.DDStatic}
}

func TestProgramDecisions(t *testing.T) {
	published := func(venueID string) []events.Event {
		return []events.Event{evch.ProgramPublished{Program: program(stage1, ""), VenueID: venueID, At: t0}}
	}
	cases := []struct {
		name   string
		given  []events.Event
		when   *challengecmd.PublishProgram
		status int
		code   string
		field  any
	}{
		{"a program chains into one of its own venue", nil,
			&challengecmd.PublishProgram{Program: program(stage1, stage2), VenueID: "v1", By: "u", NextVenueID: "v1"}, 0, "", nil},
		{"a program chains into one not yet published", nil,
			&challengecmd.PublishProgram{Program: program(stage1, stage2), VenueID: "v1", By: "u"}, 0, "", nil},
		{"a program never chains into another venue's program", nil,
			&challengecmd.PublishProgram{Program: program(stage1, stage2), VenueID: "v1", By: "u", NextVenueID: "v2"}, 400, "invalid_request", "nextChallengeId"},
		{"a replacement never chains into another venue's program", published("v1"),
			&challengecmd.PublishProgram{Program: program(stage1, stage2), VenueID: "v1", By: "u", NextVenueID: "v2"}, 400, "invalid_request", "nextChallengeId"},
		{"another venue's program is not replaced", published("v2"),
			&challengecmd.PublishProgram{Program: program(stage1, ""), VenueID: "v1", By: "u"}, 403, "permission_denied", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := challenge.NewProgram(stage1)
			for _, e := range tc.given {
				s = challenge.ApplyProgram(s, e)
			}
			evs, err := challenge.DecideProgram(s, keyed("k", tc.when))
			status, code, field := refusal(err)
			if err != nil && status == 0 {
				t.Fatal(err)
			}
			if status != tc.status || code != tc.code || field != tc.field {
				t.Fatalf("got %d %s field %v (%v), want %d %s field %v", status, code, field, err, tc.status, tc.code, tc.field)
			}
			if (err == nil) != (len(evs) > 0) {
				t.Fatalf("err %v with %d events", err, len(evs))
			}
		})
	}
}

func TestEnrollmentDecisions(t *testing.T) {
	p := program(stage1, "")
	enroll := func(verified bool) *challengecmd.Enroll {
		return &challengecmd.Enroll{EnrollmentID: "enr_1", AccountID: "acct_1", ChallengeID: stage1, Size: events.Int(10000),
			Type: "standard", Program: &p, Firm: "firm_1", Verified: verified}
	}
	cases := []struct {
		name   string
		when   *challengecmd.Enroll
		status int
		code   string
	}{
		{"a verified user enrolls", enroll(true), 0, ""},
		{"an unverified user is refused and nothing is recorded", enroll(false), 403, "email_unverified"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := challenge.NewEnrollments("usr_1")
			evs, err := challenge.DecideEnrollments(s, keyed("k", tc.when))
			status, code, _ := refusal(err)
			if err != nil && status == 0 {
				t.Fatal(err)
			}
			if status != tc.status || code != tc.code {
				t.Fatalf("got %d %s (%v), want %d %s", status, code, err, tc.status, tc.code)
			}
			if err != nil && len(evs) != 0 {
				t.Fatalf("a refusal recorded %d events", len(evs))
			}
			if err == nil && len(evs) == 0 {
				t.Fatal("an enrollment recorded nothing")
			}
		})
	}
}
