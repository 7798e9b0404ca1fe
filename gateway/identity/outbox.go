package identity

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// The outbox does the work of the anonymous requests whose answer must not
// tell whether an address has an account: a password reset and a new
// verification link. Their handler checks the body and the throttles,
// queues a job and answers 202, the same work for every address; one
// worker then looks the address up, records the token and mails it, no
// sooner than jobDelay after the answer, so that work does not share the
// machine with the answer it follows and slow it for a registered address. At
// most outboxSize jobs wait (503 engine_overloaded beyond, for every
// address alike); the jobs still queued when the engine stops are dropped
// (the person asks again).
const (
	outboxSize = 1024
	jobTimeout = 30 * time.Second
	jobDelay   = 100 * time.Millisecond
)

type jobKind int

const (
	jobReset jobKind = iota
	jobVerify
)

// job is one queued reset or verification link for an address (normalized).
type job struct {
	kind  jobKind
	email string
	at    time.Time // queued
}

var errOutboxFull = httpx.Unavailable(commands.CodeEngineOverloaded, "too many requests are waiting to be mailed; nothing was recorded; retry after the Retry-After seconds")

// enqueue queues j, or answers errOutboxFull.
func (h *Handlers) enqueue(j job) error {
	select {
	case h.outbox <- j:
		return nil
	default:
		return errOutboxFull
	}
}

// work runs the outbox's jobs until done is closed (nil: for ever).
func (h *Handlers) work(done <-chan struct{}) {
	for {
		select {
		case j := <-h.outbox:
			if wait := time.Until(j.at.Add(jobDelay)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-done:
					t.Stop()
					return
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
			if err := h.do(ctx, j); err != nil {
				slog.Error("identity mail job failed", "kind", int(j.kind), "err", err)
			}
			cancel()
		case <-done:
			return
		}
	}
}

// do records and mails what j asks for, when its address has a user (and,
// for a verification link, an unverified one).
func (h *Handlers) do(ctx context.Context, j job) error {
	uid := tenantcmd.UserID(j.email)
	u, err := h.user(ctx, uid)
	if errors.Is(err, projections.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	token := newToken(uid)
	switch j.kind {
	case jobReset:
		if _, err := h.exec(ctx, system, uid, &tenantcmd.RequestReset{Digest: auth.Digest(token), Until: h.cfg.Now().UTC().Add(ResetFor)}); err != nil {
			return err
		}
		h.mail(ctx, u.Email, "Reset your password",
			"Choose a new password within an hour by opening:\n\n"+h.link("/password-reset", token)+"\n\n"+
				"If you did not ask for this, ignore this mail; your password stays as it is.\n")
	case jobVerify:
		if u.EmailVerified {
			return nil
		}
		if _, err := h.exec(ctx, system, uid, &tenantcmd.IssueVerification{Digest: auth.Digest(token),
			Until: h.cfg.Now().UTC().Add(VerifyFor)}); err != nil {
			return err
		}
		h.mail(ctx, u.Email, "Verify your email address",
			"Confirm this address within 24 hours by opening:\n\n"+h.link("/verify-email", token)+"\n")
	}
	return nil
}
