package webhook

import (
	"fmt"
	"testing"
	"time"

	"github.com/svc/engine/events"
	evch "github.com/svc/engine/events/challenge"
	evfirm "github.com/svc/engine/events/firm"
)

// An enrollment's status rows reach the firm whose venue authored the
// program as enrollment.<status>; rows of a program without a firm, and
// other enrollment events, reach no one.
func TestEnrollmentRowsBecomeLifecycleWebhooks(t *testing.T) {
	at := time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)
	c := events.Committed{Subject: evch.EnrollmentSubject("u1"), Seq: 7, Commit: events.Commit{At: at, Events: []events.Event{
		evch.StageIssued{EnrollmentID: "en1", At: at},
		evch.StatusRecorded{EnrollmentID: "en1", Status: evch.StatusPassed, Actor: "system", Reason: evch.ReasonProfitTarget, Firm: "f", At: at},
		evch.StatusRecorded{EnrollmentID: "en1", Status: evch.StatusFailed, Actor: "system", At: at},
	}}}
	hooks := derive(c, map[string]acctInfo{})
	var got []string
	for _, h := range hooks {
		got = append(got, h.tenant, h.ev.Type, h.ev.ID, fmt.Sprint(h.ev.Data["reason"]))
	}
	if fmt.Sprint(got) != "[f enrollment.passed evt_7_1 profit_target]" {
		t.Fatalf("hooks %v", got)
	}
	known := map[string]bool{}
	for _, typ := range evfirm.WebhookTypes {
		known[typ] = true
	}
	for _, s := range []string{evch.StatusRegistered, evch.StatusInProgress, evch.StatusPassed, evch.StatusFailed, evch.StatusCompleted} {
		if !known["enrollment."+s] {
			t.Errorf("enrollment.%s is not a webhook type a firm can subscribe to", s)
		}
	}
}
