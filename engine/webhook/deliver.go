package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/engine/egress"
	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
)

// AttemptHeader numbers a delivery's attempts from 1: each number is sent
// at most once, whatever node delivers.
const AttemptHeader = "Webhook-Attempt"

// startLoop starts ep's worker; r.mu held.
func (r *Reactor) startLoop(ep *endpoint) {
	r.loops.Add(1)
	go r.loop(ep)
}

// loop is one endpoint's worker: it starts queued deliveries first, then due
// retries, at most InFlight at a time, until the endpoint is removed or Close.
func (r *Reactor) loop(ep *endpoint) {
	defer r.loops.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var next *delivery
		var wait time.Duration = time.Hour
		ep.mu.Lock()
		if ep.inflight < r.cfg.InFlight {
			now := r.cfg.Now()
			switch {
			case len(ep.ready) > 0:
				next, ep.ready = ep.ready[0], ep.ready[1:]
			case len(ep.retry) > 0 && !ep.retry[0].nextAt.After(now):
				next, ep.retry = ep.retry[0], ep.retry[1:]
			case len(ep.retry) > 0:
				wait = ep.retry[0].nextAt.Sub(now)
			}
			if next != nil {
				ep.inflight++
				ep.held[next] = struct{}{}
			}
		}
		ep.mu.Unlock()
		if next != nil {
			r.flight.Add(1)
			go r.attempt(ep, next)
			continue
		}
		timer.Reset(wait)
		select {
		case <-ep.wake:
		case <-timer.C:
		case <-ep.gone:
			return
		case <-r.ctx.Done():
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// attempt sends d once, records the outcome and, on failure with attempts
// left, schedules the next one: a delivery is tried len(Backoff)+1 times.
// A panic while sending is a failed attempt (see safeSend); one anywhere else
// here is logged and drops the delivery, and the endpoint's worker goes on.
// d is held (endpoint.held) until it is final or queued again.
func (r *Reactor) attempt(ep *endpoint, d *delivery) {
	defer r.flight.Done()
	released := false
	release := func() {
		ep.mu.Lock()
		defer ep.mu.Unlock()
		ep.inflight--
		released = true
	}
	defer func() {
		if v := recover(); v != nil {
			slog.Error("webhook: scheduling a delivery panicked; the delivery is dropped", "tenant", ep.tenant, "webhook", ep.id,
				"delivery", d.ev.ID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !released {
				release()
			}
			ep.settle(d, false)
		}
	}()
	n := d.attempts + 1
	if err := r.claim(ep, d, n); err != nil {
		release()
		if errors.Is(err, ErrAttemptTaken) {
			// Another node took this attempt (this one was paused past the
			// leader lease): it delivers; this node lets the delivery go.
			ep.lose(d)
			return
		}
		slog.Warn("webhook: could not claim an attempt; trying again", "webhook", ep.id, "delivery", d.ev.ID, "err", err)
		select {
		case <-time.After(time.Second):
		case <-r.ctx.Done():
			return // still held: the mark stays before it
		}
		ep.settle(d, true)
		return
	}
	out := r.safeSend(r.sendCtx, ep.tenant, ep.id, ep.url, d.ev.Type, n, d.body)
	d.attempts, d.claim = n, "" // the next attempt is claimed anew
	a := evfirm.DeliveryAttempted{DeliveryID: d.ev.ID, TenantID: ep.tenant, WebhookID: ep.id, EventType: d.ev.Type,
		Attempt: d.attempts, Status: out.Status, At: r.cfg.Now().UTC()}
	fill(&a, out)
	retry := out.Status != "succeeded" && d.attempts <= len(r.cfg.Backoff)
	if retry {
		next := a.At.Add(r.cfg.Backoff[d.attempts-1])
		a.NextAt, d.nextAt = &next, next
	}
	r.record(a)
	release()
	ep.settle(d, retry)
}

// claim takes attempt n of d in the endpoint's ledger before it is sent, and
// returns once that is committed (ErrAttemptTaken: another node has it).
// Every try of one claim carries the same Claim (d.claim), so a try whose
// commit was stored while its answer was lost (the stream's leader killed
// at that moment) is known as this node's by the next try, which goes on
// to send, rather than as another node's, which would leave the delivery
// to nobody until a leader's replay.
func (r *Reactor) claim(ep *endpoint, d *delivery, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := r.cfg.Now().UTC()
	if d.claim == "" {
		d.claim = ulid.Make().String()
	}
	env := commands.Envelope{ID: ulid.Make(), At: now, Principal: events.Principal{System: "webhook"},
		Cmd: &firmcmd.StartAttempt{Start: evfirm.DeliveryStarted{DeliveryID: d.ev.ID, TenantID: ep.tenant, WebhookID: ep.id, Attempt: n, At: now, Claim: d.claim}}}
	_, err := r.ledger.Execute(ctx, ep.tenant+"."+ep.id, env)
	return err
}

func fill(a *evfirm.DeliveryAttempted, out Outcome) {
	if out.ResponseCode != nil {
		a.ResponseCode = *out.ResponseCode
	}
	if out.Error != nil {
		a.Error = *out.Error
	}
}

// recorder groups the attempts of one endpoint that end while a commit of
// its ledger is in flight into the next commit: one fsync for many attempts.
type recorder struct {
	mu      sync.Mutex
	pending []evfirm.DeliveryAttempted
	waiters []chan struct{}
	busy    bool
}

// record appends an attempt to the endpoint's delivery ledger and returns once
// it is committed. It outlives Close's cancellation so that an attempt made is
// an attempt recorded.
func (r *Reactor) record(a evfirm.DeliveryAttempted) {
	key := a.TenantID + "." + a.WebhookID
	r.rmu.Lock()
	rec, ok := r.records[key]
	if !ok {
		rec = &recorder{}
		r.records[key] = rec
	}
	r.rmu.Unlock()
	done := make(chan struct{})
	rec.mu.Lock()
	rec.pending = append(rec.pending, a)
	rec.waiters = append(rec.waiters, done)
	lead := !rec.busy
	rec.busy = true
	rec.mu.Unlock()
	if lead {
		r.flush(key, rec)
	}
	<-done
}

// flush commits the recorder's pending attempts, batch after batch, until none is left.
func (r *Reactor) flush(key string, rec *recorder) {
	for {
		rec.mu.Lock()
		batch, waiters := rec.pending, rec.waiters
		rec.pending, rec.waiters = nil, nil
		if len(batch) == 0 {
			rec.busy = false
			rec.mu.Unlock()
			return
		}
		rec.mu.Unlock()
		if err := r.commit(key, batch); err != nil {
			slog.Warn("webhook: recording attempts", "webhook", batch[0].WebhookID, "attempts", len(batch), "err", err)
		}
		for _, w := range waiters {
			close(w)
		}
	}
}

// commit appends one batch of attempts to the delivery ledger; a panic is an
// error, so that the batch's waiters are always released.
func (r *Reactor) commit(key string, batch []evfirm.DeliveryAttempted) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("recording panicked: %v", v)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env := commands.Envelope{ID: ulid.Make(), At: batch[len(batch)-1].At, Principal: events.Principal{System: "webhook"},
		Cmd: &firmcmd.RecordAttempts{Attempts: batch}}
	_, err = r.ledger.Execute(ctx, key, env)
	return err
}

// safeSend is send with a panic contained to its one attempt: the attempt is
// a failure (retried on the schedule) and the panic is logged with the
// endpoint's id and never its URL or secret.
func (r *Reactor) safeSend(ctx context.Context, tenant, webhookID, target, eventType string, attempt int, body []byte) (out Outcome) {
	defer func() {
		if v := recover(); v != nil {
			msg := fmt.Sprint(v)
			if target != "" {
				msg = strings.ReplaceAll(msg, target, "<endpoint url>")
			}
			msg = strings.ReplaceAll(msg, Secret(r.cfg.Key, tenant, webhookID), "<secret>")
			if len(msg) > 500 {
				msg = msg[:500]
			}
			slog.Error("webhook: delivery attempt panicked; recorded as failed", "tenant", tenant, "webhook", webhookID,
				"type", eventType, "panic", msg, "stack", string(debug.Stack()))
			e := "the engine failed during the attempt"
			out = Outcome{Status: "failed", Error: &e}
		}
	}()
	return r.send(ctx, tenant, webhookID, target, attempt, body)
}

// send makes one signed POST; a 2xx answer is success. Errors never carry the
// URL (it may hold a token) or the secret.
func (r *Reactor) send(ctx context.Context, tenant, webhookID, target string, attempt int, body []byte) Outcome {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	fail := func(msg string, code *int) Outcome { return Outcome{Status: "failed", ResponseCode: code, Error: &msg} }
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fail("invalid endpoint url", nil)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "svc-webhooks/1")
	req.Header.Set(AttemptHeader, strconv.Itoa(attempt))
	req.Header.Set(SignatureHeader, Sign(Secret(r.cfg.Key, tenant, webhookID), r.cfg.Now(), body))
	resp, err := r.client.Do(req)
	if err != nil {
		return fail(describe(err, r.cfg.Timeout), nil)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return Outcome{Status: "succeeded", ResponseCode: &code}
	}
	return fail("the endpoint answered "+http.StatusText(code), &code)
}

func describe(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var eg *egress.Error
	switch {
	case errors.As(err, &eg):
		// The rule only, never the address: a name may resolve inside our network.
		return "refused: the endpoint's address is not public (" + eg.Rule + "); webhooks reach only public internet addresses"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "no answer within " + timeout.String()
	case errors.Is(err, context.Canceled):
		return "the engine stopped during the attempt"
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

// Ping delivers a signed ping to an endpoint at once, records the attempt in
// the delivery log and reports the outcome. It is never retried.
func (r *Reactor) Ping(ctx context.Context, tenant, webhookID, target string) Outcome {
	now := r.cfg.Now().UTC()
	ev := Event{ID: "evt_ping_" + ulid.Make().String(), Type: evfirm.TypePing, CreatedAt: now,
		Data: map[string]any{"webhookId": webhookID}}
	out := r.safeSend(ctx, tenant, webhookID, target, ev.Type, 1, encode(ev))
	a := evfirm.DeliveryAttempted{DeliveryID: ev.ID, TenantID: tenant, WebhookID: webhookID, EventType: ev.Type,
		Attempt: 1, Status: out.Status, At: r.cfg.Now().UTC()}
	fill(&a, out)
	r.record(a)
	return out
}

// Close stops taking work, lets attempts in flight finish for up to grace,
// records them, saves the replay mark of a started reactor, and stops
// (hearing its tail too).
func (r *Reactor) Close(grace time.Duration) {
	r.stop()
	r.unlisten()
	r.loops.Wait()
	done := make(chan struct{})
	go func() { r.flight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		r.sendStop()
		<-done
	}
	r.sendStop()
	r.mu.Lock()
	started := r.live()
	r.mu.Unlock()
	if started {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.saveMark(ctx, r.mark())
		cancel()
	}
	r.ledger.Close()
}

// Secret is the signing secret of a firm's endpoint.
func (r *Reactor) Secret(tenant, webhookID string) string {
	return Secret(r.cfg.Key, tenant, webhookID)
}
