package app

// liveByDefault is the live trading switch of a user who never set it
// (ENGINE_LIVE_TRADING_DEFAULT): off in production, on in the sandbox,
// unless the setting says otherwise. A user turns it on with the password
// again (POST /api/account/live-trading).
func (c Config) liveByDefault() bool {
	if c.LiveTrading != "" {
		return c.LiveTrading == "on"
	}
	return c.Env != "production"
}
