package events

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Raw is one log message before decoding.
type Raw struct {
	Subject string
	Seq     uint64
	Data    []byte
}

// pipelineChunk is how many messages travel together through a Pipeline's
// stages: enough to make a channel hand-off cheap, small enough to keep
// every core busy from the first chunk.
const pipelineChunk = 256

// Pipeline decodes log messages on every core and hands them on in the order
// they were added: one goroutine per core decodes whole chunks, and each sink
// runs in a goroutine of its own on the same ordered chunks, so a replay uses
// every core instead of reading, decoding and folding one commit after
// another. Sinks must not change the commits they are handed, which they
// share, nor keep the slice once they return: the pipeline reuses it (a sink
// copies the commits it keeps). Add is called from one goroutine; Close ends
// the pipeline.
type Pipeline struct {
	reg   Registry
	skip  func(subject string) bool
	cur   []Raw
	buf   *[]Raw // where cur came from
	work  chan pipeChunk
	order chan chan *decodedChunk
	wg    sync.WaitGroup

	// Chunks are recycled once decoded (raws) and once every sink is done
	// with them (decoded): a replay's chunk arrays would otherwise be a
	// tenth of what it allocates.
	raws    sync.Pool // of *[]Raw
	decoded sync.Pool // of *decodedChunk

	failed  chan struct{} // closed at the first error
	errOnce sync.Once
	err     error
}

type pipeChunk struct {
	msgs *[]Raw
	out  chan *decodedChunk // the decoded chunk, always sent once
}

// decodedChunk is one decoded chunk and how many sinks still read it.
type decodedChunk struct {
	cs      []Committed
	readers atomic.Int32
}

// done is called by each sink that read d; the last one recycles it.
func (p *Pipeline) done(d *decodedChunk) {
	if d.readers.Add(-1) == 0 {
		clear(d.cs)
		d.cs = d.cs[:0]
		p.decoded.Put(d)
	}
}

// Pipeline starts a pipeline feeding sinks. skip names the messages no sink
// wants; they are not decoded. A sink's error stops the pipeline: Add and
// Close return the first error.
func (r Registry) Pipeline(skip func(subject string) bool, sinks ...func([]Committed) error) *Pipeline {
	if skip == nil {
		skip = func(string) bool { return false }
	}
	p := &Pipeline{reg: r, skip: skip, work: make(chan pipeChunk, 8), order: make(chan chan *decodedChunk, 64),
		failed: make(chan struct{})}
	p.raws.New = func() any { b := make([]Raw, 0, pipelineChunk); return &b }
	p.decoded.New = func() any { return &decodedChunk{cs: make([]Committed, 0, pipelineChunk)} }
	decoders := runtime.GOMAXPROCS(0)
	var decoding sync.WaitGroup
	decoding.Add(decoders)
	for range decoders {
		go func() {
			defer decoding.Done()
			for c := range p.work {
				d := p.decoded.Get().(*decodedChunk)
				d.cs = p.decode(*c.msgs, d.cs[:0])
				clear(*c.msgs)
				*c.msgs = (*c.msgs)[:0]
				p.raws.Put(c.msgs)
				c.out <- d
			}
		}()
	}
	feeds := make([]chan *decodedChunk, len(sinks))
	for i, fn := range sinks {
		feeds[i] = make(chan *decodedChunk, 64)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for d := range feeds[i] {
				if !p.stopped() {
					if err := fn(d.cs); err != nil {
						p.fail(err)
					}
				}
				p.done(d)
			}
		}()
	}
	p.wg.Add(1)
	go func() { // hands decoded chunks on in the order they were added
		defer p.wg.Done()
		for res := range p.order {
			d := <-res
			d.readers.Store(int32(len(feeds)) + 1)
			for _, f := range feeds {
				f <- d
			}
			p.done(d)
		}
		for _, f := range feeds {
			close(f)
		}
		decoding.Wait()
	}()
	return p
}

// decode decodes one chunk into out; after the pipeline failed it decodes nothing.
func (p *Pipeline) decode(msgs []Raw, out []Committed) []Committed {
	if p.stopped() {
		return out
	}
	for _, m := range msgs {
		if p.skip(m.Subject) {
			continue
		}
		c, err := p.reg.Decode(m.Data)
		if err != nil {
			p.fail(fmt.Errorf("decode %s at %d: %w", m.Subject, m.Seq, err))
			return out[:0]
		}
		out = append(out, Committed{Subject: m.Subject, Seq: m.Seq, Commit: c})
	}
	return out
}

func (p *Pipeline) fail(err error) {
	p.errOnce.Do(func() {
		p.err = err
		close(p.failed)
	})
}

func (p *Pipeline) stopped() bool {
	select {
	case <-p.failed:
		return true
	default:
		return false
	}
}

// Add queues one message; it returns the pipeline's first error, if any.
func (p *Pipeline) Add(m Raw) error {
	if p.stopped() {
		return p.err
	}
	if p.cur == nil {
		p.buf = p.raws.Get().(*[]Raw)
		p.cur = *p.buf
	}
	p.cur = append(p.cur, m)
	if len(p.cur) == pipelineChunk {
		p.send()
	}
	return nil
}

func (p *Pipeline) send() {
	*p.buf = p.cur
	c := pipeChunk{msgs: p.buf, out: make(chan *decodedChunk, 1)}
	p.cur, p.buf = nil, nil
	p.order <- c.out
	p.work <- c
}

// Abort stops the pipeline with err (when it has not failed already): what
// is queued is neither decoded nor handed to a sink any more, and Close
// returns as soon as the chunks in hand are done. A replay whose context
// ended calls it before Close.
func (p *Pipeline) Abort(err error) { p.fail(err) }

// Close hands on what was added, waits until every sink saw it and returns
// the first error.
func (p *Pipeline) Close() error {
	if len(p.cur) > 0 {
		p.send()
	}
	close(p.order)
	close(p.work)
	p.wg.Wait()
	if p.stopped() {
		return p.err
	}
	return nil
}
