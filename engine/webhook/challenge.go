package webhook

import (
	"github.com/svc/engine/events"
	evch "github.com/svc/engine/events/challenge"
)

// enrollmentHooks maps an enrollment's status rows to the lifecycle events
// of the firm whose venue authored the program: enrollment.<status>
// (registered, in_progress, passed, failed, completed), with the
// enrollment, its account, the status, the reason and the time.
func enrollmentHooks(c events.Committed, id func(int) string) []hook {
	if !events.IsKind(c.Subject, evch.KindEnrollment) {
		return nil
	}
	var out []hook
	for i, e := range c.Events {
		r, ok := e.(evch.StatusRecorded)
		if !ok || r.Firm == "" {
			continue
		}
		data := map[string]any{"enrollmentId": r.EnrollmentID, "accountId": r.AccountID, "status": r.Status,
			"actor": r.Actor, "reason": r.Reason, "at": r.At.UTC()}
		out = append(out, hook{r.Firm, Event{ID: id(i), Type: "enrollment." + r.Status, CreatedAt: c.At.UTC(), Data: data}})
	}
	return out
}
