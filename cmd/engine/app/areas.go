package app

import (
	"github.com/svc/engine/gateway"
	riskgw "github.com/svc/engine/gateway/risk"
)

// areas lists the route areas beyond trading and account.
func areas(a *App, cfg Config) []gateway.Area {
	return []gateway.Area{
		riskgw.Area,
		a.backOfficeArea(cfg),
		marketArea(a),
	}
}
