package tenant

// SetLiveTrading sets the user's live trading switch. The gateway turns it
// on only after the user gave the password again; off needs no more than
// the session.
type SetLiveTrading struct{ On bool }

// Validate checks the shape: any value is one.
func (c *SetLiveTrading) Validate() error { return nil }
