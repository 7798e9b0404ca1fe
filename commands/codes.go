package commands

import (
	"net/http"
	"sync"
)

// CodeInfo describes one stable error code.
type CodeInfo struct {
	// Status lists the HTTP statuses the code is answered with; empty for a
	// code sent only in a stream's error event.
	Status []int
	// RetrySafe reports whether the client may send the same request again,
	// as is and with the same idempotency key (after Retry-After, where one is
	// sent), and expect it may succeed: nothing was recorded and the cause is
	// transient. False where resending earns the same answer until the
	// request or the account changes, where the write may have been recorded
	// (outcome_unknown: read the account stream or the receipt first) and
	// where it was (write_recorded).
	RetrySafe bool
}

// RetrySafe reports the catalogue's RetrySafe of code (false for a code not
// in it): whether an answer with it carries Retry-After.
func RetrySafe(code string) bool { return codes()[code].RetrySafe }

// codes is the catalogue read once.
var codes = sync.OnceValue(Codes)

// Codes is the table of every stable error code the engine answers (the
// code of a Refusal, of an httpx.Error and of a stream's error event). It
// returns a new map on every call. A test checks that every code the source
// answers is listed here and that schema/openapi.yaml's ErrorCode enum lists
// the same codes.
func Codes() map[string]CodeInfo {
	return map[string]CodeInfo{
		"exit_plan_conflict":           {Status: []int{http.StatusConflict}}, // read the plan again
		"api_key_required":             {Status: []int{http.StatusUnauthorized}},
		"invalid_statement":            {Status: []int{http.StatusUnauthorized}}, // ask production for a new statement
		"link_closed":                  {Status: []int{http.StatusGone}},
		"link_expired":                 {Status: []int{http.StatusGone}},
		"link_connected":               {Status: []int{http.StatusConflict}},
		"app_disconnected":             {Status: []int{http.StatusForbidden}}, // the trader disconnected the app from the account
		"frame_session_required":       {Status: []int{http.StatusUnauthorized}},
		"origin_not_allowed":           {Status: []int{http.StatusForbidden}},
		"plan_limit_reached":           {Status: []int{http.StatusConflict}},
		"already_member":               {Status: []int{http.StatusConflict}},
		"last_owner":                   {Status: []int{http.StatusConflict}},
		"member_limit_reached":         {Status: []int{http.StatusConflict}},
		"organization_limit_reached":   {Status: []int{http.StatusConflict}}, // a user in orgcmd.MaxOrganizations makes no more
		"venue_limit_reached":          {Status: []int{http.StatusConflict}}, // an organization holds orgcmd.MaxVenues at most
		"account_limit_reached":        {Status: []int{http.StatusConflict}},
		"payment_required":             {Status: []int{http.StatusPaymentRequired}}, // a priced program where no fee is collected
		"enrollment_in_flight":         {Status: []int{http.StatusConflict}},        // pass or fail the enrollment in flight first
		"enrollment_not_failed":        {Status: []int{http.StatusConflict}},        // only a failed enrollment is reset
		"email_unverified":             {Status: []int{http.StatusForbidden}},
		"invalid_credentials":          {Status: []int{http.StatusUnauthorized}},
		"invalid_token":                {Status: []int{http.StatusBadRequest}},
		"key_limit_reached":            {Status: []int{http.StatusConflict}},
		"amount_precision_exceeded":    {Status: []int{http.StatusBadRequest}},
		"balance_refused":              {Status: []int{http.StatusConflict}},
		"body_too_large":               {Status: []int{http.StatusRequestEntityTooLarge}},
		"currency_not_issuable":        {Status: []int{http.StatusBadRequest}},
		"engine_draining":              {Status: []int{http.StatusServiceUnavailable}, RetrySafe: true},
		"account_unresolved":           {Status: []int{http.StatusServiceUnavailable}, RetrySafe: true}, // a node joined or left: no owner yet
		"owner_unavailable":            {Status: []int{http.StatusServiceUnavailable}, RetrySafe: true}, // the owning node did not take the command
		"account_not_owned":            {Status: []int{http.StatusServiceUnavailable}, RetrySafe: true}, // the ownership is moving
		"ownership_unavailable":        {Status: []int{http.StatusServiceUnavailable}, RetrySafe: true}, // the node has not joined yet
		"engine_overloaded":            {Status: []int{http.StatusServiceUnavailable}, RetrySafe: true},
		"read_models_behind":           {Status: []int{http.StatusServiceUnavailable}, RetrySafe: true}, // a read waits for the read models to show a write they owe it
		"engine_starting":              {Status: []int{http.StatusServiceUnavailable}, RetrySafe: true},
		"feed_requires_connection":     {Status: []int{http.StatusServiceUnavailable}}, // until a futures source is connected
		"feed_unavailable":             {Status: []int{http.StatusServiceUnavailable}, RetrySafe: true},
		"holds_unreadable":             {Status: []int{http.StatusServiceUnavailable}, RetrySafe: true},
		"idempotency_conflict":         {Status: []int{http.StatusConflict}}, // the earlier write stands
		"idempotency_key_required":     {Status: []int{http.StatusBadRequest}},
		"image_unavailable":            {Status: []int{http.StatusBadGateway}, RetrySafe: true},
		"instrument_not_permitted":     {Status: []int{http.StatusUnprocessableEntity}},
		"internal_error":               {Status: []int{http.StatusInternalServerError}}, // a command that panicked
		"invalid_cursor":               {Status: []int{http.StatusBadRequest}},
		"invalid_expression":           {Status: []int{http.StatusBadRequest}},
		"invalid_key":                  {Status: []int{http.StatusUnauthorized}},
		"invalid_request":              {Status: []int{http.StatusBadRequest, http.StatusUnprocessableEntity}},
		"invalid_subscription":         {Status: []int{http.StatusBadRequest}},
		"invalid_timeframe":            {Status: []int{http.StatusBadRequest}},
		"invalid_window":               {Status: []int{http.StatusBadRequest}},
		"lock_not_owned":               {Status: []int{http.StatusConflict}},
		"log_unavailable":              {Status: []int{http.StatusServiceUnavailable}, RetrySafe: true},
		"market_data_unavailable":      {Status: []int{http.StatusUnprocessableEntity}, RetrySafe: true}, // until the first price arrives
		"method_not_allowed":           {Status: []int{http.StatusMethodNotAllowed}},                     // the Allow header lists the route's methods
		"not_found":                    {Status: []int{http.StatusNotFound}},
		"order_quantity_above_limit":   {Status: []int{http.StatusUnprocessableEntity}},
		"outcome_unknown":              {Status: []int{http.StatusServiceUnavailable}},
		"permission_denied":            {Status: []int{http.StatusForbidden}},
		"position_not_closable":        {Status: []int{http.StatusUnprocessableEntity}},
		"rate_limited":                 {Status: []int{http.StatusTooManyRequests}, RetrySafe: true},
		"reconciliation_hold":          {Status: []int{http.StatusLocked}},
		"registration_expired":         {Status: []int{http.StatusConflict}},
		"registration_linked":          {Status: []int{http.StatusConflict}},
		"registration_revoked":         {Status: []int{http.StatusConflict}},
		"risk_locked":                  {Status: []int{http.StatusLocked}},
		"session_required":             {Status: []int{http.StatusUnauthorized}},
		"credential_revoked":           {}, // a stream's last error event: the key or session that opened it ended
		"settings_locked":              {Status: []int{http.StatusLocked}},
		"store_unavailable":            {Status: []int{http.StatusServiceUnavailable}, RetrySafe: true},
		"subscription_limit":           {}, // the 25th subscription of /api/market/streams: an error event
		"too_many_streams":             {Status: []int{http.StatusTooManyRequests}, RetrySafe: true},
		"too_many_subscriptions":       {Status: []int{http.StatusBadRequest}},
		"too_many_symbols":             {Status: []int{http.StatusBadRequest}},
		"unknown_symbol":               {Status: []int{http.StatusNotFound}},
		"unsupported_media_type":       {Status: []int{http.StatusUnsupportedMediaType}},
		"unsupported_value":            {Status: []int{http.StatusBadRequest}}, // a venue manifest's or condition's value outside the allowed set
		"webhook_exists":               {Status: []int{http.StatusConflict}},
		"webhook_limit_reached":        {Status: []int{http.StatusConflict}},
		"config_limit_reached":         {Status: []int{http.StatusConflict}},
		"entitled_source_unserved":     {Status: []int{http.StatusBadRequest}},
		"entry_halted":                 {Status: []int{http.StatusUnprocessableEntity}},
		"financing_superseded":         {Status: []int{http.StatusBadRequest}},
		"loss_limit_unenforced":        {Status: []int{http.StatusBadRequest}},
		"margin_policy_superseded":     {Status: []int{http.StatusBadRequest}},
		"round_turn_is_both":           {Status: []int{http.StatusBadRequest}},
		"stage_version_unrecorded":     {Status: []int{http.StatusLocked}},
		"venue_route_missing":          {Status: []int{http.StatusUnprocessableEntity}},
		"version_conflict":             {Status: []int{http.StatusConflict}},
		"risk_policy_id_reserved":      {Status: []int{http.StatusConflict}},
		"risk_policy_owner_conflict":   {Status: []int{http.StatusConflict}},
		"risk_policy_posting_mismatch": {Status: []int{http.StatusConflict}},
		"risk_policy_unchanged":        {Status: []int{http.StatusConflict}},
		"risk_policy_unsourced":        {Status: []int{http.StatusConflict}},
		"risk_policy_version_conflict": {Status: []int{http.StatusConflict}},
		"write_recorded":               {Status: []int{http.StatusAccepted}}, // recorded; the read models are behind
	}
}
