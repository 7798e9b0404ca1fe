package httpx_test

import (
	"testing"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/gateway/httpx"
)

// A refusal marked Conflict is answered 409 where the catalogue lists 409
// for its code (risk_locked of a close the provider does not hold to
// reducing), its usual status otherwise.
func TestAConflictRefusalIsAnswered409WhereItsCodeAllows(t *testing.T) {
	conflict := func(code commands.Code) *commands.Refusal {
		r := commands.Refuse(code, "no", map[string]any{"holds": []string{"firm_halt"}})
		r.Conflict = true
		return r
	}
	for _, tc := range []struct {
		name   string
		err    *commands.Refusal
		status int
	}{
		{"risk_locked is 423", commands.Refuse(commands.CodeRiskLocked, "held", nil), 423},
		{"risk_locked of a close that cannot be proved to reduce is 409", conflict(commands.CodeRiskLocked), 409},
		{"a code without 409 keeps its own", conflict(commands.CodeReconciliationHold), 423},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err.Status() != tc.status {
				t.Errorf("Status() %d, want %d", tc.err.Status(), tc.status)
			}
			for _, fam := range []httpx.Family{httpx.Trading, httpx.Venue} {
				if st, _, code := answer(t, fam, tc.err); st != tc.status || code != string(tc.err.Code) {
					t.Errorf("family %d: answered %d %s, want %d %s", fam, st, code, tc.status, tc.err.Code)
				}
			}
		})
	}
}
