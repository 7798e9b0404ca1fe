package engine

import (
	"context"

	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/engine/risk"
	"github.com/svc/engine/engine/webhook"
)

// The engine's one door: the gateway sends commands and reads typed results,
// errors and views through this package only, never through an aggregate, the
// mailbox, the event-log client or a reactor (a test in gateway/ checks the
// imports).

// Result is the outcome of a command: its commit's sequence (the aggregate's
// revision; 0 when nothing was recorded) and the events it recorded.
type Result = mailbox.Result

// ErrOutcomeUnknown means a command's commit was sent but its acknowledgement
// was lost: it may or may not be in the log. Retry with the same key.
var ErrOutcomeUnknown = eventlog.ErrOutcomeUnknown

// ErrLogUnavailable means a command was refused before anything was sent: the
// commit log's connection is down. Nothing was recorded; retry with the same key.
var ErrLogUnavailable = eventlog.ErrLogUnavailable

// LockView is an account's risk lock and monitoring state as the risk routes
// and the account stream's `lock` event render it.
type LockView = account.LockView

// RiskLock reads the account's lock from its live state, with its revision; a
// state that cannot be read fails closed (503 holds_unreadable), never a pass.
func (e *Engine) RiskLock(ctx context.Context, accountID string) (LockView, uint64, error) {
	var v LockView
	var rev uint64
	at := e.Now().UTC()
	err := e.accounts.Inspect(ctx, accountID, func(s *account.State, r uint64) { v, rev = s.RiskLock(at), r })
	if err != nil {
		return v, 0, risk.FailClosed(err)
	}
	return v, rev, nil
}

// OnLock registers fn for every change of an account's lock (the account
// stream's `lock` event).
func (e *Engine) OnLock(fn func(accountID string, rev uint64, v LockView)) { e.risk.OnLock(fn) }

// WebhookOutcome is the outcome of one webhook delivery attempt (a test ping's answer).
type WebhookOutcome = webhook.Outcome
