package market

// Lister is a feed that serves a fixed set of symbols (a provider's feed);
// a Merged feed routes those symbols to it.
type Lister interface {
	Lists(symbol string) bool
}

// Merged is one feed over several: each symbol comes from the first listing
// feed that Lists it, every other symbol from the primary. Subscribers hear
// every feed's quotes.
type Merged struct {
	primary Feed
	listed  []Feed
}

// Merge makes the feed over primary and the listing feeds (each a Lister).
func Merge(primary Feed, listed ...Feed) *Merged {
	return &Merged{primary: primary, listed: listed}
}

// Name is the primary feed's name.
func (m *Merged) Name() string { return m.primary.Name() }

// Source is the feed symbol comes from.
func (m *Merged) Source(symbol string) Feed {
	for _, f := range m.listed {
		if l, ok := f.(Lister); ok && l.Lists(symbol) {
			return f
		}
	}
	return m.primary
}

// Quote returns the newest quote of symbol from its source.
func (m *Merged) Quote(symbol string) (Quote, bool) { return m.Source(symbol).Quote(symbol) }

// Subscribe registers fn with every feed.
func (m *Merged) Subscribe(fn func(Quote)) func() {
	cancels := []func(){m.primary.Subscribe(fn)}
	for _, f := range m.listed {
		cancels = append(cancels, f.Subscribe(fn))
	}
	return func() {
		for _, c := range cancels {
			c()
		}
	}
}
