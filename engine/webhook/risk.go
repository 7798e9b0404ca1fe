package webhook

import (
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evfirm "github.com/svc/engine/events/firm"
)

// riskHook maps the risk controls' lock events to risk.locked and risk.unlocked.
func riskHook(e events.Event, number string) (string, map[string]any) {
	switch e := e.(type) {
	case evacct.RiskLocked:
		return evfirm.TypeRiskLocked, map[string]any{"accountNumber": number, "reason": e.Control, "lockedAt": e.At.UTC(),
			"tradingUnlockAt": e.TradingUnlockAt.UTC()}
	case evacct.RiskUnlocked:
		return evfirm.TypeRiskUnlocked, map[string]any{"accountNumber": number, "reason": e.Reason, "unlockedAt": e.At.UTC()}
	case evacct.EvaluationBreached:
		return evfirm.TypeRiskLocked, map[string]any{"accountNumber": number, "reason": evacct.ReasonEvalBreach, "lockedAt": e.At.UTC()}
	case evacct.EvaluationReleased:
		return evfirm.TypeRiskUnlocked, map[string]any{"accountNumber": number, "reason": evacct.ReasonEvalBreach, "unlockedAt": e.At.UTC()}
	}
	return "", nil
}
