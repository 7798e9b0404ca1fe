package webhook

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evfirm "github.com/svc/engine/events/firm"
)

// Event is one webhook event as delivered: {id, type, createdAt, data}.
type Event struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	CreatedAt time.Time      `json:"createdAt"`
	Data      map[string]any `json:"data"`
}

type hook struct {
	tenant string
	ev     Event
}

type acctInfo struct{ tenant, number string }

// derive lists the webhook events one commit yields. accounts maps account ids
// to their firm and number; Opened events in the commit update it.
func derive(c events.Committed, accounts map[string]acctInfo) []hook {
	var out []hook
	id := func(i int) string { return fmt.Sprintf("evt_%d_%d", c.Seq, i) }
	if aid, ok := events.SubjectID(c.Subject, events.KindAccount); ok {
		for i, e := range c.Events {
			if o, ok := e.(evacct.Opened); ok {
				accounts[aid] = acctInfo{tenant: o.TenantID, number: o.AccountNumber}
				continue
			}
			a, ok := accounts[aid]
			if !ok {
				continue
			}
			typ, data := accountHook(e, a.number)
			if typ != "" {
				out = append(out, hook{a.tenant, Event{ID: id(i), Type: typ, CreatedAt: c.At.UTC(), Data: data}})
			}
		}
		return out
	}
	if tenant, ok := events.SubjectID(c.Subject, events.KindFirm); ok {
		for i, e := range c.Events {
			switch e := e.(type) {
			case evfirm.RegistrationLinked:
				out = append(out, hook{tenant, Event{ID: id(i), Type: evfirm.TypeRegistrationLinked, CreatedAt: c.At.UTC(),
					Data: map[string]any{"registrationId": e.RegistrationID, "linkedAt": e.At.UTC()}}})
			case evfirm.RegistrationRevoked:
				out = append(out, hook{tenant, Event{ID: id(i), Type: evfirm.TypeRegistrationRevoked, CreatedAt: c.At.UTC(),
					Data: map[string]any{"registrationId": e.RegistrationID, "revokedAt": e.At.UTC()}}})
			}
		}
	}
	out = append(out, liveHoldHooks(c, id)...) // livehold.go
	return append(out, enrollmentHooks(c, id)...)
}

func accountHook(e events.Event, number string) (string, map[string]any) {
	switch e := e.(type) {
	case evacct.BalanceChanged:
		if e.Op == evacct.OpReset || e.ReferenceID == "" {
			return "", nil
		}
		return evfirm.TypeBalanceRecorded, map[string]any{"referenceId": e.ReferenceID, "accountNumber": number, "op": e.Op,
			"amount": e.Amount, "state": "applied", "appliedAt": e.At.UTC(), "balance": e.Balance, "currency": e.Currency}
	case evacct.AccountReset:
		return evfirm.TypeAccountReset, map[string]any{"accountNumber": number, "referenceId": e.ReferenceID,
			"balance": e.Balance, "resetAt": e.At.UTC()}
	case evacct.FirmHalted:
		return evfirm.TypeRiskLocked, map[string]any{"accountNumber": number, "reason": "firm_halt", "lockedAt": e.At.UTC()}
	case evacct.FirmResumed:
		return evfirm.TypeRiskUnlocked, map[string]any{"accountNumber": number, "reason": "firm_halt", "unlockedAt": e.At.UTC()}
	}
	return riskHook(e, number)
}

func encode(ev Event) []byte {
	b, err := json.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("webhook: encode %s: %v", ev.Type, err))
	}
	return b
}
