package news

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Config shapes the service.
type Config struct {
	Feeds  []string      // RSS or Atom URLs
	Poll   time.Duration // between feed fetches; default 5 minutes
	Sample bool          // load the shipped sample set
	Client *http.Client  // default: 10 s timeout
	Now    func() time.Time
	// Store keeps ingested feed headlines across restarts; nil keeps them in memory only.
	Store *JetStream
}

// Nudge tells calendar subscribers which events changed.
type Nudge struct {
	IDs       []string
	UpdatedAt time.Time
}

// Service ingests headlines and calendar events and notifies subscribers.
type Service struct {
	News     *Store
	Calendar *Calendar
	Images   *Images
	cfg      Config
	mu       sync.Mutex
	newsSubs map[chan Item]struct{}
	calSubs  map[chan Nudge]struct{}
}

// New makes a service and loads the sample set when configured.
func New(cfg Config) (*Service, error) {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{News: NewStore(), Calendar: NewCalendar(), Images: NewImages(cfg.Client), cfg: cfg,
		newsSubs: map[chan Item]struct{}{}, calSubs: map[chan Nudge]struct{}{}}
	if cfg.Store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		items, err := cfg.Store.Load(ctx)
		cancel()
		if err != nil {
			return nil, err
		}
		s.Ingest(items)
	}
	if cfg.Sample {
		items, events, err := Sample(cfg.Now())
		if err != nil {
			return nil, err
		}
		s.Ingest(items)
		for _, ev := range events {
			s.Calendar.Upsert(ev)
		}
	}
	return s, nil
}

// Ingest stores new items, oldest first, and sends each new one to the
// news subscribers; it returns how many were new.
func (s *Service) Ingest(items []Item) int { return len(s.ingest(items)) }

func (s *Service) ingest(items []Item) []Item {
	sort.SliceStable(items, func(i, j int) bool { return items[i].PublishedAt.Before(items[j].PublishedAt) })
	var fresh []Item
	for _, it := range items {
		if !s.News.Add(it) {
			continue
		}
		fresh = append(fresh, it)
		s.mu.Lock()
		for ch := range s.newsSubs {
			select {
			case ch <- it:
			default: // a subscriber this far behind pages the list instead
			}
		}
		s.mu.Unlock()
	}
	return fresh
}

// UpsertEvent stores a calendar event and nudges subscribers when it changed.
func (s *Service) UpsertEvent(ev Event) {
	if s.Calendar.Upsert(ev) {
		s.nudge([]string{ev.ID})
	}
}

func (s *Service) nudge(ids []string) {
	if len(ids) == 0 {
		return
	}
	n := Nudge{IDs: ids, UpdatedAt: s.cfg.Now().UTC()}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.calSubs {
		select {
		case ch <- n:
		default:
		}
	}
}

// SubscribeNews delivers every new headline until cancel.
func (s *Service) SubscribeNews() (<-chan Item, func()) {
	ch := make(chan Item, 64)
	s.mu.Lock()
	s.newsSubs[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.newsSubs, ch)
		s.mu.Unlock()
	}
}

// SubscribeCalendar delivers a nudge on every calendar change until cancel.
func (s *Service) SubscribeCalendar() (<-chan Nudge, func()) {
	ch := make(chan Nudge, 16)
	s.mu.Lock()
	s.calSubs[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.calSubs, ch)
		s.mu.Unlock()
	}
}

// PollOnce fetches every configured feed once.
func (s *Service) PollOnce(ctx context.Context) {
	for _, url := range s.cfg.Feeds {
		items, err := FetchFeed(ctx, s.cfg.Client, url, s.cfg.Now())
		if err != nil {
			slog.Warn("news feed", "feed", url, "err", err)
			continue
		}
		fresh := s.ingest(items)
		if len(fresh) > 0 {
			slog.Info("news feed", "feed", url, "new", len(fresh))
		}
		if s.cfg.Store != nil {
			for _, it := range fresh {
				if err := s.cfg.Store.Save(ctx, it); err != nil {
					slog.Warn("news: save", "item", it.ID, "err", err)
					break
				}
			}
		}
	}
}

// Release publishes calendar values whose time has come and nudges subscribers.
func (s *Service) Release() { s.nudge(s.Calendar.Release(s.cfg.Now())) }

// Run polls the feeds every Poll and releases calendar values every second
// until ctx ends.
func (s *Service) Run(ctx context.Context) {
	if len(s.cfg.Feeds) > 0 {
		go func() {
			t := time.NewTicker(s.cfg.Poll)
			defer t.Stop()
			for {
				s.PollOnce(ctx)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Release()
		}
	}
}
