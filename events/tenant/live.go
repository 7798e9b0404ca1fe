package tenant

import "time"

//go:generate go tool msgp -file live.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// LiveTradingSet records the user's live trading switch: On lets orders
// reach the user's accounts at providers; off refuses them (paper is never
// affected). A user's first setting replaces the engine's default.
type LiveTradingSet struct {
	On bool      `json:"on"`
	At time.Time `json:"at"`
}

func (LiveTradingSet) Type() string { return "tenant.live_trading_set.v1" }
