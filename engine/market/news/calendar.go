package news

import (
	"sort"
	"sync"
	"time"
)

// Event is one economic-calendar event. Forecast, Previous and Actual are
// display strings as published ("3.2%", "175K"); nil when not known (Actual
// before the release).
type Event struct {
	ID        string
	Title     string
	Country   string
	Currency  string
	Time      time.Time
	Impact    string // low, medium, high
	Forecast  *string
	Previous  *string
	Actual    *string
	Roots     []string
	UpdatedAt time.Time
	// pending is the actual value the sample set releases at Time.
	pending *string
}

// ImpactRank orders impact tiers: low 1, medium 2, high 3; 0 for anything else.
func ImpactRank(s string) int {
	switch s {
	case "low":
		return 1
	case "medium":
		return 2
	case "high":
		return 3
	}
	return 0
}

// Calendar keeps events by time. Safe for concurrent use.
type Calendar struct {
	mu     sync.RWMutex
	events []*Event // ascending by time, then id
	byID   map[string]*Event
}

// NewCalendar makes an empty calendar.
func NewCalendar() *Calendar { return &Calendar{byID: map[string]*Event{}} }

// Upsert stores ev, replacing an event with its id; it reports whether anything changed.
func (c *Calendar) Upsert(ev Event) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.byID[ev.ID]; ok {
		if sameEvent(old, &ev) {
			return false
		}
		*old = ev
		c.sort()
		return true
	}
	p := &ev
	c.byID[ev.ID] = p
	c.events = append(c.events, p)
	c.sort()
	return true
}

func (c *Calendar) sort() {
	sort.Slice(c.events, func(i, j int) bool {
		if !c.events[i].Time.Equal(c.events[j].Time) {
			return c.events[i].Time.Before(c.events[j].Time)
		}
		return c.events[i].ID < c.events[j].ID
	})
}

func str(p *string) string {
	if p == nil {
		return "\x00"
	}
	return *p
}

func sameEvent(a, b *Event) bool {
	return a.Title == b.Title && a.Time.Equal(b.Time) && a.Impact == b.Impact && str(a.Forecast) == str(b.Forecast) &&
		str(a.Previous) == str(b.Previous) && str(a.Actual) == str(b.Actual)
}

// Window lists events with from <= time < to, at or above minImpact (a rank),
// of currency when not empty, ascending.
func (c *Calendar) Window(from, to time.Time, minImpact int, currency string) []Event {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i := sort.Search(len(c.events), func(i int) bool { return !c.events[i].Time.Before(from) })
	var out []Event
	for ; i < len(c.events) && c.events[i].Time.Before(to); i++ {
		e := c.events[i]
		if ImpactRank(e.Impact) >= minImpact && (currency == "" || e.Currency == currency) {
			out = append(out, *e)
		}
	}
	return out
}

// Release publishes the pending actual value of every event whose time has
// come by now; it returns the ids of the events it changed.
func (c *Calendar) Release(now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for _, e := range c.events {
		if e.pending != nil && e.Actual == nil && !e.Time.After(now) {
			v := *e.pending
			e.Actual, e.pending, e.UpdatedAt = &v, nil, now
			ids = append(ids, e.ID)
		}
	}
	return ids
}
