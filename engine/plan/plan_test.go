package plan_test

import (
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	plancmd "github.com/svc/engine/commands/plan"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/plan"
	"github.com/svc/engine/events"
	evplan "github.com/svc/engine/events/plan"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func spec(name string) evplan.Spec {
	half := events.Int(1).Quo(events.Int(2))
	return evplan.Spec{Name: name, Stop: &evplan.Distance{Ticks: 20},
		Targets: []evplan.Target{{Distance: evplan.Distance{Ticks: 20}, Share: half}, {Distance: evplan.Distance{Ticks: 40}, Share: half}}}
}

func decide(t *testing.T, s *plan.State, c commands.Command) ([]events.Event, error) {
	t.Helper()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	evs, err := plan.Decide(s, commands.Envelope{ID: ulid.Make(), At: t0, Cmd: c})
	for _, e := range evs {
		plan.Apply(s, e)
	}
	return evs, err
}

func code(err error) string {
	var r *commands.Refusal
	if errors.As(err, &r) {
		return string(r.Code)
	}
	return ""
}

func TestConditionalWrites(t *testing.T) {
	s := plan.New("t1")
	if _, err := decide(t, s, &plancmd.Save{PlanID: "p1", Spec: spec("A"), Create: true, Digest: "d"}); err != nil {
		t.Fatal(err)
	}
	rev1 := s.Plans["p1"].Revision
	// The same Idempotency-Key and body: nothing more; another body: conflict.
	if evs, err := decide(t, s, &plancmd.Save{PlanID: "p1", Spec: spec("A"), Create: true, Digest: "d"}); err != nil || len(evs) != 0 {
		t.Fatalf("repeat: %v %v", evs, err)
	}
	if _, err := decide(t, s, &plancmd.Save{PlanID: "p1", Spec: spec("B"), Create: true, Digest: "e"}); code(err) != "idempotency_conflict" {
		t.Fatalf("reused key: %v", err)
	}
	if _, err := decide(t, s, &plancmd.Save{PlanID: "p1", Spec: spec("B"), IfRevision: rev1}); err != nil {
		t.Fatal(err)
	}
	rev2 := s.Plans["p1"].Revision
	if rev2 == rev1 {
		t.Fatal("a replace kept the revision")
	}
	// A stale revision is refused with the current one; so is a stale delete.
	var r *commands.Refusal
	if _, err := decide(t, s, &plancmd.Save{PlanID: "p1", Spec: spec("C"), IfRevision: rev1}); !errors.As(err, &r) || r.Code != "exit_plan_conflict" || r.Params["revision"] != rev2 {
		t.Fatalf("stale replace: %v", err)
	}
	if _, err := decide(t, s, &plancmd.Delete{PlanID: "p1", IfRevision: rev1}); code(err) != "exit_plan_conflict" {
		t.Fatalf("stale delete: %v", err)
	}
	// Even the same content saved again gets a new revision (a preview of the old one stays stale).
	if _, err := decide(t, s, &plancmd.Save{PlanID: "p1", Spec: spec("A"), IfRevision: rev2}); err != nil || s.Plans["p1"].Revision == rev1 {
		t.Fatalf("A again: %v %s", err, s.Plans["p1"].Revision)
	}
	if _, err := decide(t, s, &plancmd.Delete{PlanID: "p1", IfRevision: s.Plans["p1"].Revision}); err != nil {
		t.Fatal(err)
	}
	if _, err := decide(t, s, &plancmd.Delete{PlanID: "p1", IfRevision: rev2}); code(err) != "not_found" {
		t.Fatalf("delete of a deleted plan: %v", err)
	}
	if _, err := decide(t, s, &plancmd.Save{PlanID: "p1", Spec: spec("A"), Create: true, Digest: "d"}); code(err) != "idempotency_conflict" {
		t.Fatalf("a deleted id reused: %v", err)
	}
}

func TestPlanLimit(t *testing.T) {
	s := plan.New("t1")
	for i := 0; i < plancmd.MaxPlans; i++ {
		if _, err := decide(t, s, &plancmd.Save{PlanID: ulid.Make().String(), Spec: spec("A"), Create: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := decide(t, s, &plancmd.Save{PlanID: "one-more", Spec: spec("A"), Create: true}); code(err) != "plan_limit_reached" {
		t.Fatalf("got %v", err)
	}
}

func TestCheck(t *testing.T) {
	d := func(s string) events.Decimal { v, _ := events.ParseDecimal(s); return v }
	off := d("12.5")
	neg := d("-1")
	cases := []struct {
		name string
		spec evplan.Spec
		ok   bool
	}{
		{"stop and two targets", spec("A"), true},
		{"nothing to do", evplan.Spec{Name: "x"}, false},
		{"no name", evplan.Spec{Stop: &evplan.Distance{Ticks: 1}}, false},
		{"ticks and offset", evplan.Spec{Name: "x", Stop: &evplan.Distance{Ticks: 1, Offset: &off}}, false},
		{"an offset", evplan.Spec{Name: "x", Stop: &evplan.Distance{Offset: &off}}, true},
		{"a negative offset", evplan.Spec{Name: "x", Stop: &evplan.Distance{Offset: &neg}}, false},
		{"too many ticks", evplan.Spec{Name: "x", Stop: &evplan.Distance{Ticks: plancmd.MaxTicks + 1}}, false},
		{"shares above 1", evplan.Spec{Name: "x", Targets: []evplan.Target{{Distance: evplan.Distance{Ticks: 1}, Share: d("0.6")}, {Distance: evplan.Distance{Ticks: 2}, Share: d("0.6")}}}, false},
		{"shares below 1 without a runner", evplan.Spec{Name: "x", Targets: []evplan.Target{{Distance: evplan.Distance{Ticks: 1}, Share: d("0.5")}}}, false},
		{"shares below 1 with a runner", evplan.Spec{Name: "x", Runner: true, Targets: []evplan.Target{{Distance: evplan.Distance{Ticks: 1}, Share: d("0.5")}}}, true},
		{"a runner with nothing left", evplan.Spec{Name: "x", Runner: true, Targets: []evplan.Target{{Distance: evplan.Distance{Ticks: 1}, Share: d("1")}}}, false},
		{"a share of 5 decimals", evplan.Spec{Name: "x", Runner: true, Targets: []evplan.Target{{Distance: evplan.Distance{Ticks: 1}, Share: d("0.12345")}}}, false},
		{"five targets", evplan.Spec{Name: "x", Targets: []evplan.Target{
			{Distance: evplan.Distance{Ticks: 1}, Share: d("0.2")}, {Distance: evplan.Distance{Ticks: 2}, Share: d("0.2")}, {Distance: evplan.Distance{Ticks: 3}, Share: d("0.2")},
			{Distance: evplan.Distance{Ticks: 4}, Share: d("0.2")}, {Distance: evplan.Distance{Ticks: 5}, Share: d("0.2")}}}, false},
		{"breakeven without a stop", evplan.Spec{Name: "x", Trailing: &evplan.Trailing{Distance: evplan.Distance{Ticks: 3}},
			Breakeven: &evplan.Breakeven{Trigger: evplan.Distance{Ticks: 5}}}, false},
		{"breakeven and trailing", evplan.Spec{Name: "x", Stop: &evplan.Distance{Ticks: 10}, Trailing: &evplan.Trailing{Distance: evplan.Distance{Ticks: 3}},
			Breakeven: &evplan.Breakeven{Trigger: evplan.Distance{Ticks: 5}, PlusTicks: 1}}, true},
	}
	for _, tc := range cases {
		if err := plancmd.Check(tc.spec); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	full := evplan.Spec{Name: "x", Stop: &evplan.Distance{Ticks: 10}, Runner: true, Trailing: &evplan.Trailing{Distance: evplan.Distance{Ticks: 3}},
		Breakeven: &evplan.Breakeven{Trigger: evplan.Distance{Ticks: 5}},
		Targets:   []evplan.Target{{Distance: evplan.Distance{Ticks: 1}, Share: d("0.25")}, {Distance: evplan.Distance{Ticks: 2}, Share: d("0.25")}}}
	if got := plancmd.Requires(full); len(got) != 6 {
		t.Fatalf("requires %v", got)
	}
}

func TestPlansReplayRebuildsTheSameState(t *testing.T) {
	r := enginetest.NewReplay(t, enginetest.Core[*plan.State]{New: func() *plan.State { return plan.New("t1") },
		Decide: plan.Decide, Apply: plan.Apply, Registry: evplan.Registry()})
	r.Do(commands.Envelope{ID: ulid.Make(), At: t0, Cmd: &plancmd.Save{PlanID: "p1", Spec: spec("A"), Create: true, Digest: "d"}})
	r.Do(commands.Envelope{ID: ulid.Make(), At: t0, Cmd: &plancmd.Save{PlanID: "p2", Spec: spec("B"), Create: true}})
	r.Do(commands.Envelope{ID: ulid.Make(), At: t0, Cmd: &plancmd.Save{PlanID: "p1", Spec: spec("C"), IfRevision: plancmd.Revision("p1", 1, spec("A"))}})
	r.Do(commands.Envelope{ID: ulid.Make(), At: t0, Cmd: &plancmd.Delete{PlanID: "p2", IfRevision: plancmd.Revision("p2", 1, spec("B"))}})
	r.Check()
}
