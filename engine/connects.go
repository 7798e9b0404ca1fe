package engine

import (
	"context"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine/connect"
	"github.com/svc/engine/engine/mailbox"
	evconnect "github.com/svc/engine/events/connect"
)

// connects are Connect's aggregates: apps, links and redeemed statement ids.
type connects struct {
	apps  *mailbox.Group[*connect.App]
	links *mailbox.Group[*connect.Link]
	stmts *mailbox.Group[*connect.Statement]
}

func newConnects(cfg Config, e *Engine) connects {
	return connects{
		apps: mailbox.NewGroup(mailbox.Kind[*connect.App]{Name: "app", Subject: evconnect.AppSubject,
			New: connect.NewApp, Decide: connect.DecideApp, Apply: connect.ApplyApp}, cfg.Log, e.reg, cfg.Metrics),
		links: mailbox.NewGroup(mailbox.Kind[*connect.Link]{Name: "link", Subject: evconnect.LinkSubject,
			New: connect.NewLink, Decide: connect.DecideLink, Apply: connect.ApplyLink}, cfg.Log, e.reg, cfg.Metrics),
		stmts: mailbox.NewGroup(mailbox.Kind[*connect.Statement]{Name: "stmt", Subject: evconnect.StatementSubject,
			New: connect.NewStatement, Decide: connect.DecideStatement, Apply: connect.ApplyStatement}, cfg.Log, e.reg, cfg.Metrics),
	}
}

func (c connects) close() {
	c.apps.Close()
	c.links.Close()
	c.stmts.Close()
}

// App runs cmd on the Connect app appID and commits its events.
func (e *Engine) App(ctx context.Context, appID string, env commands.Envelope) (Result, error) {
	if err := env.Cmd.Validate(); err != nil {
		return Result{}, err
	}
	return e.connect.apps.Execute(ctx, appID, env)
}

// Link runs cmd on the Connect link linkID and commits its events.
func (e *Engine) Link(ctx context.Context, linkID string, env commands.Envelope) (Result, error) {
	if err := env.Cmd.Validate(); err != nil {
		return Result{}, err
	}
	return e.connect.links.Execute(ctx, linkID, env)
}

// Statement redeems a Connect account statement's single-use id.
func (e *Engine) Statement(ctx context.Context, jti string, env commands.Envelope) (Result, error) {
	if err := env.Cmd.Validate(); err != nil {
		return Result{}, err
	}
	return e.connect.stmts.Execute(ctx, jti, env)
}

// LinkState reads a link from its aggregate, or false when it has none.
func (e *Engine) LinkState(ctx context.Context, linkID string) (l evconnect.Link, found bool, err error) {
	err = e.connect.links.Inspect(ctx, linkID, func(s *connect.Link, _ uint64) {
		l, found = s.Link, s.State != ""
	})
	return l, found, err
}
