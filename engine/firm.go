package engine

import (
	"context"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/engine/firm"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
)

func newFirms(cfg Config, reg events.Registry) *mailbox.Group[*firm.State] {
	return mailbox.NewGroup(mailbox.Kind[*firm.State]{
		Name:    "firm",
		Subject: evfirm.Subject,
		New:     firm.New,
		Decide:  firm.Decide,
		Apply:   firm.Apply,
	}, cfg.Log, reg, cfg.Metrics)
}

// Firm runs cmd on the back-office aggregate of firm tenantID and commits its events.
func (e *Engine) Firm(ctx context.Context, tenantID string, env commands.Envelope) (mailbox.Result, error) {
	if err := env.Cmd.Validate(); err != nil {
		return mailbox.Result{}, err
	}
	return e.firms.Execute(ctx, tenantID, env)
}

// AdviseFirm decides env on the firm's live state without committing: the
// refusal, or the replay (*commands.Replay) of an Idempotency-Key answered
// before, that the command would meet; nil when it would be recorded. The
// command need not be whole yet (a test ping's outcome, asked before the
// ping): Firm validates it when it runs.
func (e *Engine) AdviseFirm(ctx context.Context, tenantID string, env commands.Envelope) error {
	_, err := e.firms.DryRun(ctx, tenantID, env)
	return err
}

// InspectFirm runs fn on the firm's live state in its mailbox goroutine.
func (e *Engine) InspectFirm(ctx context.Context, tenantID string, fn func(*firm.State, uint64)) error {
	return e.firms.Inspect(ctx, tenantID, fn)
}

// BalanceOp runs a balance operation on an account, with the marks a debit
// needs to value the account's open positions.
func (e *Engine) BalanceOp(ctx context.Context, accountID string, env commands.Envelope) (mailbox.Result, error) {
	if c, ok := env.Cmd.(*firmcmd.BalanceOp); ok {
		c.Marks = e.marks()
	}
	return e.Account(ctx, accountID, env)
}

// marks are the mids of every instrument with a quote.
func (e *Engine) marks() map[string]events.Decimal {
	m := e.market()
	out := make(map[string]events.Decimal, len(m.Quotes))
	for inst, q := range m.Quotes {
		out[inst] = q.Bid.Add(q.Ask).Quo(events.Int(2))
	}
	return out
}
