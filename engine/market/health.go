package market

import "time"

// Health is what a live feed knows of its own state.
type Health struct {
	Connected   bool      `json:"connected"`
	LastMessage time.Time `json:"lastMessage"`
	// Stale lists the symbols whose data stopped arriving within the feed's staleness limit.
	Stale      []string `json:"stale"`
	Gaps       int64    `json:"gaps"`       // sequence gaps detected (missed trades)
	Missed     int64    `json:"missed"`     // trades known missed across the gaps
	Reconnects int64    `json:"reconnects"` // connections re-established after a loss
}

// HealthReporter is a feed that reports its health (an exchange adapter).
// Feeds without it (simulated, replay) are always healthy.
type HealthReporter interface {
	Health() Health
}

// Served reports whether feed currently serves symbol: false when the feed
// reports it stale or disconnected.
func Served(feed Feed, symbol string) bool {
	if m, ok := feed.(*Merged); ok {
		feed = m.Source(symbol)
	}
	hr, ok := feed.(HealthReporter)
	if !ok {
		return true
	}
	h := hr.Health()
	if !h.Connected {
		return false
	}
	for _, s := range h.Stale {
		if s == symbol {
			return false
		}
	}
	return true
}
