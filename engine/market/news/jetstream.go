package news

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/market"
)

// Retention is how long ingested feed headlines are kept across restarts.
const Retention = 30 * 24 * time.Hour

// JetStream keeps ingested feed headlines in their own stream (MKT_NEWS, one
// subject per item, mkt.news.<id>) so they survive restarts; the shipped
// sample set is not stored (it is laid out afresh at each start).
type JetStream struct {
	js    jetstream.JetStream
	names market.Names
}

type stored struct {
	ID          string    `json:"id"`
	Source      string    `json:"source"`
	Title       string    `json:"title"`
	Summary     string    `json:"summary"`
	URL         string    `json:"url"`
	ImageURL    string    `json:"imageUrl"`
	PublishedAt time.Time `json:"publishedAt"`
	Roots       []string  `json:"roots"`
}

// OpenJetStream ensures the news stream.
func OpenJetStream(ctx context.Context, js jetstream.JetStream, names market.Names) (*JetStream, error) {
	_, err := eventlog.CreateStream(ctx, js, jetstream.StreamConfig{
		Name: names.Stream("NEWS"), Subjects: []string{names.Subject("news.>")}, Storage: jetstream.FileStorage, Replicas: max(names.Replicas, 1),
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld, MaxAge: Retention, MaxMsgsPerSubject: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("news: stream: %w", err)
	}
	return &JetStream{js: js, names: names}, nil
}

// Save stores one headline.
func (p *JetStream) Save(ctx context.Context, it Item) error {
	b, err := json.Marshal(stored(it))
	if err != nil {
		return err
	}
	_, err = p.js.Publish(ctx, p.names.Subject("news."+it.ID), b)
	return err
}

// Load reads every stored headline.
func (p *JetStream) Load(ctx context.Context) ([]Item, error) {
	s, err := p.js.Stream(ctx, p.names.Stream("NEWS"))
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		return nil, err
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	var out []Item
	for {
		m, err := it.Next()
		if err != nil {
			return out, fmt.Errorf("news: load: %w", err)
		}
		var st stored
		if json.Unmarshal(m.Data(), &st) == nil && validID(st.ID) {
			out = append(out, Item(st))
		} else {
			slog.Warn("news: unreadable stored item", "subject", m.Subject())
		}
		md, err := m.Metadata()
		if err != nil || md.Sequence.Stream >= info.State.LastSeq || md.NumPending == 0 {
			return out, nil
		}
	}
}
