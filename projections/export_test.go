package projections

import "context"

// StartWaitFor is WaitFor(ctx, seq) with its waiter registered before it
// returns: the wait runs in a goroutine and its answer arrives on the
// channel. A test that must apply commits only after a waiter is in place
// uses it instead of sleeping.
func StartWaitFor(ctx context.Context, p *Projector, seq uint64) <-chan error {
	ch := make(chan error, 1)
	w, err := p.register(seq)
	if w == nil {
		ch <- err
		return ch
	}
	go func() { ch <- p.await(ctx, w) }()
	return ch
}
