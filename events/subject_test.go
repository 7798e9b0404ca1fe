package events_test

import (
	"testing"

	"github.com/svc/engine/events"
)

func TestSubjectsAreBuiltAndParsedInOnePlace(t *testing.T) {
	s := events.Subject(events.KindAccount, "a1")
	if s != "evt.account.a1" {
		t.Fatalf("subject %q", s)
	}
	if id, ok := events.SubjectID(s, events.KindAccount); !ok || id != "a1" {
		t.Fatalf("account id %q %v", id, ok)
	}
	for _, other := range []string{"evt.firm.a1", "evt.accounts.a1", "xevt.account.a1", "evt.account", "account.a1"} {
		if events.IsKind(other, events.KindAccount) {
			t.Errorf("%q read as an account subject", other)
		}
	}
	if events.ID("evt.firm.t1", events.KindFirm) != "t1" || events.ID("evt.firm.t1", events.KindTenant) != "" {
		t.Fatal("ID")
	}
}
