package bars

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc/engine/events"

	"github.com/cockroachdb/apd/v3"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/market"
)

// JetStream persists bars in one JetStream stream per stored resolution
// (MKT_BARS_1S, MKT_BARS_1M, MKT_BARS_1D under the default names), one subject
// per symbol and bucket (mkt.bars.1m.<symbol>.<time>) holding only its newest version; the
// stream's MaxAge is the resolution's retention. These streams are separate
// from the commit stream: bars are derived data, never commands.
type JetStream struct {
	js      jetstream.JetStream
	read    func(ctx context.Context, st *Store, n *atomic.Int64) error // readAll; tests stall it
	names   market.Names
	queue   chan record
	dropped atomic.Int64
	wg      sync.WaitGroup
}

type record struct {
	Symbol string      `json:"s"`
	Res    int         `json:"r"`
	Time   int64       `json:"t"`
	Open   apd.Decimal `json:"o"`
	High   apd.Decimal `json:"h"`
	Low    apd.Decimal `json:"l"`
	Close  apd.Decimal `json:"c"`
	Volume apd.Decimal `json:"v"`
}

var resCode = [3]string{"1s", "1m", "1d"}

func streamName(n market.Names, res market.Resolution) string {
	return n.Stream("BARS_" + strings.ToUpper(resCode[res]))
}

// subjectToken makes a symbol safe as one subject token.
func subjectToken(symbol string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '*' || r == '>' || r <= ' ' || r > '~' {
			return '_'
		}
		return r
	}, symbol)
}

// OpenJetStream ensures the bar streams with the given retention.
func OpenJetStream(ctx context.Context, js jetstream.JetStream, names market.Names, retention Retention) (*JetStream, error) {
	for _, res := range market.Resolutions {
		_, err := eventlog.CreateStream(ctx, js, jetstream.StreamConfig{
			Name:              streamName(names, res),
			Subjects:          []string{names.Subject("bars." + resCode[res] + ".>")},
			Storage:           jetstream.FileStorage,
			Replicas:          max(names.Replicas, 1),
			Retention:         jetstream.LimitsPolicy,
			Discard:           jetstream.DiscardOld,
			MaxAge:            retention[res],
			MaxMsgsPerSubject: 1,
		})
		if err != nil {
			return nil, fmt.Errorf("bars: stream %s: %w", streamName(names, res), err)
		}
	}
	p := &JetStream{js: js, names: names, queue: make(chan record, 8192)}
	p.read = p.readAll
	return p, nil
}

// Save queues b for publication; when the queue is full the bar is dropped
// (its newer version or the close will be saved).
func (p *JetStream) Save(symbol string, res market.Resolution, b market.Bar) {
	r := record{Symbol: symbol, Res: int(res), Time: b.Time}
	r.Open.Set(&b.Open)
	r.High.Set(&b.High)
	r.Low.Set(&b.Low)
	r.Close.Set(&b.Close)
	r.Volume.Set(&b.Volume)
	select {
	case p.queue <- r:
	default:
		p.dropped.Add(1)
	}
}

// Dropped counts bars not saved because the queue was full.
func (p *JetStream) Dropped() int64 { return p.dropped.Load() }

// Start publishes queued bars in the background until ctx ends, then
// publishes what is queued; Close waits for that.
func (p *JetStream) Start(ctx context.Context) {
	p.wg.Add(1)
	go p.run(ctx)
}

func (p *JetStream) run(ctx context.Context) {
	defer p.wg.Done()
	for {
		select {
		case r := <-p.queue:
			p.publish(r)
		case <-ctx.Done():
			for {
				select {
				case r := <-p.queue:
					p.publish(r)
				default:
					return
				}
			}
		}
	}
}

// Close waits for the publisher started by Start to publish what was queued.
func (p *JetStream) Close() { p.wg.Wait() }

func (p *JetStream) publish(r record) {
	b, err := json.Marshal(&r)
	if err != nil {
		return
	}
	subj := p.names.Subject("bars." + resCode[r.Res] + "." + subjectToken(r.Symbol) + "." + strconv.FormatInt(r.Time, 10))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.js.Publish(ctx, subj, b); err != nil {
		slog.Warn("bars: save", "subject", subj, "err", err)
	}
}

// LoadWait bounds how long Load holds a start: the history is derived
// data, and a read of it that stalls (a consumer the cluster is slow to
// create, asked again by the client every 10 s) must not keep an engine from
// serving. What is not read by then is read on in the background, for at
// most LoadMax.
const LoadWait = 2 * time.Second

// LoadMax bounds the background read of the history.
const LoadMax = time.Minute

// Load reads every stored bar into st, for at most LoadWait, and answers how
// many it read by then; the rest are read in the background (a stored bar
// never replaces one the store holds already: the live feed's is newer).
func (p *JetStream) Load(ctx context.Context, st *Store) (int, error) {
	var n atomic.Int64
	done := make(chan error, 1)
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), LoadMax)
	go func() {
		defer cancel()
		err := p.read(lctx, st, &n)
		if err != nil && n.Load() > 0 {
			slog.Warn("bars: history read in part", "bars", n.Load(), "err", err)
		}
		done <- err
	}()
	wait := time.NewTimer(LoadWait)
	defer wait.Stop()
	select {
	case err := <-done:
		return int(n.Load()), err
	case <-wait.C:
		slog.Warn("bars: the history is still being read; serving meanwhile", "bars", n.Load(), "waited", LoadWait.String())
		return int(n.Load()), nil
	case <-ctx.Done():
		return int(n.Load()), ctx.Err()
	}
}

// readAll reads every stored bar into st, counting them in n, until ctx ends.
func (p *JetStream) readAll(ctx context.Context, st *Store, n *atomic.Int64) error {
	for _, res := range market.Resolutions {
		s, err := p.js.Stream(ctx, streamName(p.names, res))
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs == 0 {
			continue
		}
		last := info.State.LastSeq
		cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
		if err != nil {
			return err
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(4096))
		if err != nil {
			return err
		}
		for {
			m, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				it.Stop()
				return fmt.Errorf("bars: load %s: %w", streamName(p.names, res), err)
			}
			var r record
			if events.UnmarshalStored(m.Data(), &r) == nil && r.Res == int(res) {
				st.Fill(r.Symbol, res, market.Bar{Time: r.Time, Open: r.Open, High: r.High, Low: r.Low, Close: r.Close, Volume: r.Volume})
				n.Add(1)
			}
			md, err := m.Metadata()
			if err != nil || md.Sequence.Stream >= last || md.NumPending == 0 {
				break
			}
		}
		it.Stop()
	}
	return nil
}
