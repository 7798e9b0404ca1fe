package simkit

import (
	"context"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// StreamFaults misbehave a simulator's event streams: Duplicate sends every event twice, Reorder
// swaps every two consecutive events of a stream (a lone event goes out after ReorderHold),
// BalanceFirst sends the balance update a fill makes before the fill's own report (the providers
// document no order between them).
type StreamFaults struct {
	Duplicate    bool          `json:"duplicate"`
	Reorder      bool          `json:"reorder"`
	ReorderHold  time.Duration `json:"reorderHold,omitempty"` // 200ms when zero
	BalanceFirst bool          `json:"balanceFirst,omitempty"`
}

// Copies is how many times an event goes out: 2 under Duplicate, else 1.
func (f StreamFaults) Copies() int {
	if f.Duplicate {
		return 2
	}
	return 1
}

// Reorder holds back one event of a stream under StreamFaults.Reorder, to send it after the next
// one, or on its own once ReorderHold has passed. Guarded by the simulator's lock.
type Reorder[T any] struct {
	held    T
	holding bool
	timer   *time.Timer
}

// Pass sends ev through the reordering of f with send, under the simulator's lock mu: at once when
// f does not reorder; else the first event is held, and the next goes out before it. A held event
// left alone goes out after f.ReorderHold (200 ms when zero), through the send it came with, with mu
// taken.
func (r *Reorder[T]) Pass(f StreamFaults, mu sync.Locker, ev T, send func(T)) {
	if !f.Reorder {
		send(ev)
		return
	}
	if !r.holding {
		r.held, r.holding = ev, true
		hold := f.ReorderHold
		if hold <= 0 {
			hold = 200 * time.Millisecond
		}
		r.timer = time.AfterFunc(hold, func() {
			mu.Lock()
			defer mu.Unlock()
			r.Flush(send)
		})
		return
	}
	send(ev)
	r.Flush(send)
}

// Flush sends the held event, if any, with send now.
func (r *Reorder[T]) Flush(send func(T)) {
	r.Stop()
	r.timer = nil
	if r.holding {
		ev := r.held
		var none T
		r.held, r.holding = none, false
		send(ev)
	}
}

// Stop stops the timer of a held event; the event stays held.
func (r *Reorder[T]) Stop() {
	if r.timer != nil {
		r.timer.Stop()
	}
}

// Outbox is one WebSocket connection's queue of outgoing messages, emptied by its writer goroutine
// (Out, until Ctx ends or Out closes). A client that does not keep up (a full queue) is dropped, as
// the providers drop a consumer that lags. Send, Drop, Close, Closing and Abrupt run under the
// simulator's lock.
type Outbox[T any] struct {
	Out     chan T
	Ctx     context.Context
	cancel  context.CancelFunc
	abrupt  bool
	closing bool
}

// NewOutbox makes an outbox of size messages.
func NewOutbox[T any](size int) Outbox[T] {
	ctx, cancel := context.WithCancel(context.Background())
	return Outbox[T]{Out: make(chan T, size), Ctx: ctx, cancel: cancel}
}

// Send queues msg; nothing once the connection is closing, and a full queue drops it.
func (o *Outbox[T]) Send(msg T) {
	if o.closing {
		return
	}
	select {
	case o.Out <- msg:
	default:
		o.Drop()
	}
}

// Drop ends the connection at once, without a close frame, as a network failure would.
func (o *Outbox[T]) Drop() {
	o.abrupt = true
	o.closing = true
	o.cancel()
}

// Close ends the connection normally once what is queued is written.
func (o *Outbox[T]) Close() {
	if !o.closing {
		o.closing = true
		close(o.Out)
	}
}

// Closing says whether the connection is ending (Drop or Close).
func (o *Outbox[T]) Closing() bool { return o.closing }

// Abrupt says whether the connection was dropped.
func (o *Outbox[T]) Abrupt() bool { return o.abrupt }

// Shut ends the connection once its writer has returned: it cancels Ctx and closes ws, at once
// (without a close frame) when abrupt, which the caller read under the simulator's lock.
func (o *Outbox[T]) Shut(ws *websocket.Conn, abrupt bool) {
	o.cancel()
	if ws == nil {
		return
	}
	if abrupt {
		_ = ws.CloseNow()
		return
	}
	_ = ws.Close(websocket.StatusNormalClosure, "")
}

// Write writes one text message to ws, bounded by 10 s.
func Write(ctx context.Context, ws *websocket.Conn, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return ws.Write(ctx, websocket.MessageText, msg)
}
