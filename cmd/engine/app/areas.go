package app

import "github.com/svc/engine/gateway"

// areas lists the route areas beyond trading and account.
func areas(a *App, cfg Config) []gateway.Area {
	return nil
}
