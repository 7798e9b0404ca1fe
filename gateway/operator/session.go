package operator

// CookieName is the session cookie's name: an operator signs in as any user does.
const CookieName = "svc_session"

// Scopes an operator's grant on a venue can carry.
const (
	ScopeAccountRead  = "account:read"
	ScopeAccountWrite = "account:write"
)
