package events

//go:generate go tool msgp -file envelope.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Principal names who called and on whose behalf.
type Principal struct {
	TenantID   string `json:"tenantId,omitempty"`
	UserID     string `json:"userId,omitempty"`
	KeyID      string `json:"keyId,omitempty"`
	OnBehalfOf string `json:"onBehalfOf,omitempty"`
	System     string `json:"system,omitempty"` // set when a reactor or bootstrap made the command
}
