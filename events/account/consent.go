package account

import "time"

//go:generate go tool msgp -file consent.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// LiveConsentSet records the trader's word on live trading by the Connect
// app an account was linked through (hosted Connect): Granted, the app's
// orders may reach the provider, the trader's money; withdrawn, they are
// refused before anything is sent. Cause says how it was given: link (the
// link form's box), relink (the same account linked again), hosted
// (withdrawn on hosted Connect's page) or disconnect (the trader
// disconnected the app from the account, which ends it). An account linked
// by its own user, not through an app, never records it: its user's live
// trading switch applies.
type LiveConsentSet struct {
	Granted bool      `json:"granted"`
	Cause   string    `json:"cause"`
	At      time.Time `json:"at"`
}

// Causes of a LiveConsentSet.
const (
	ConsentLink       = "link"
	ConsentRelink     = "relink"
	ConsentHosted     = "hosted"
	ConsentDisconnect = "disconnect"
)

func (LiveConsentSet) Type() string { return "account.live_consent_set.v1" }
