package userfeed

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
)

// ErrUnknownSymbol: the symbol names no product of the catalog, or a
// contract month the provider does not list.
var ErrUnknownSymbol = errors.New("userfeed: no such futures contract")

// Contract is a contract month as a trader's feed serves it: the provider's
// contract with the catalog's product.
type Contract struct {
	Symbol        string // the provider's name of the month: ESZ6
	Root          string // the product's root: ES
	Product       market.Product
	Expiration    time.Time // zero when the provider gives none
	TickSize      events.Decimal
	ValuePerPoint events.Decimal
	Currency      string
}

// Fraction is how the product's prices are written: the catalog's
// priceFraction, nil for a product quoted in decimals.
func (c Contract) Fraction() *market.Fraction { return c.Product.PriceFraction }

// Name is the product's name and the month: "E-mini S&P 500 Dec 2026".
func (c Contract) Name() string {
	if c.Expiration.IsZero() {
		return c.Product.Name + " " + c.Symbol
	}
	return c.Product.Name + " " + monthOf(c)
}

// monthOf is the contract's month and year from its name's month code and
// its expiration's decade ("Dec 2026").
func monthOf(c Contract) string {
	rest := strings.TrimPrefix(c.Symbol, c.Root)
	if rest == "" {
		return c.Expiration.Format("Jan 2006")
	}
	m := strings.IndexByte(monthCodes, rest[0])
	if m < 0 {
		return c.Expiration.Format("Jan 2006")
	}
	y := c.Expiration.Year()
	if d, err := strconv.Atoi(rest[1:]); err == nil && len(rest) == 2 {
		y = y - y%10 + d
		if y < c.Expiration.Year()-1 {
			y += 10
		}
	}
	return time.Month(m + 1).String()[:3] + " " + strconv.Itoa(y)
}

// Instrument is the contract as the catalog's instruments are written:
// whole contracts, its value per point the multiplier.
func (c Contract) Instrument() market.Instrument {
	one := events.Int(1)
	return market.Instrument{Symbol: c.Symbol, Name: c.Name(), Exchange: c.Product.Exchange, Type: "future", AssetClass: "futures",
		TickSize: c.TickSize, LotStep: one, MinQuantity: one, Multiplier: c.ValuePerPoint}
}

// monthCodes are the futures month letters, January to December.
const monthCodes = "FGHJKMNQUVXZ"

// monthsAhead is how far ahead the listed months are looked for.
const monthsAhead = 24

// listTTL bounds how long a product's listed months are kept before the
// library is read again (sooner when the front month expires).
const listTTL = 10 * time.Minute

// frontTTL bounds how long the provider's month to trade now is kept
// before it is asked again: a roll is seen within it.
const frontTTL = time.Minute

// symbolRef is a futures symbol read: its root, and the nth listed month
// (a root or continuous symbol) or the provider's name of a month.
type symbolRef struct {
	root  string
	nth   int    // 1: the front month; 0 with month set
	month string // the provider's name: ESZ6
}

// parse reads a futures symbol: a root (ES), a continuous symbol (ES1!,
// ES2!) or a month (ESZ6, ESZ26, ESZ2026: the provider names months with
// the year's last digit).
func (s *Source) parse(symbol string) (symbolRef, error) {
	sym := strings.ToUpper(strings.TrimSpace(symbol))
	root, ok := market.FuturesRoot(sym, s.cfg.Products)
	if !ok {
		return symbolRef{}, ErrUnknownSymbol
	}
	rest := sym[len(root):]
	switch {
	case rest == "":
		return symbolRef{root: root, nth: 1}, nil
	case strings.HasSuffix(rest, "!"):
		n, err := strconv.Atoi(rest[:len(rest)-1])
		if err != nil || n < 1 || n > 12 {
			return symbolRef{}, ErrUnknownSymbol
		}
		return symbolRef{root: root, nth: n}, nil
	}
	return symbolRef{root: root, month: root + rest[:1] + rest[len(rest)-1:]}, nil
}

// listing is a product's listed months, nearest expiration first, and
// which of them the provider trades now. Never changed once made.
type listing struct {
	months     []Contract
	until      time.Time // when the months are read again
	front      int       // the index of the month to trade now
	frontUntil time.Time // when the provider is asked again
}

// candidates are the provider's names of the product's months in its cycle
// (its listed months where its roll is not modelled) over monthsAhead.
func candidates(p market.Product, now time.Time) []string {
	cycle := p.RollCycle
	if !p.RollModelled && len(p.ListedMonths) > 0 {
		cycle = strings.Join(p.ListedMonths, "")
	}
	var out []string
	y, m := now.Year(), now.Month()
	for i := 0; i <= monthsAhead; i++ {
		mm := (int(m)-1+i)%12 + 1
		yy := y + (int(m)-1+i)/12
		code := monthCodes[mm-1]
		if strings.IndexByte(cycle, code) >= 0 {
			out = append(out, fmt.Sprintf("%s%c%d", p.Root, code, yy%10))
		}
	}
	return out
}

// listed reads the product's listed months from the provider's library
// with the login's session (cached for listTTL, or until the front month
// expires) and the month to trade now: the provider's roll
// (provider.RollSession, asked again after frontTTL), else the nearest
// month not expired.
func (f *Feed) listed(ctx context.Context, root string) (*listing, error) {
	now := f.src.cfg.Now()
	f.mu.Lock()
	l := f.listings[root]
	f.mu.Unlock()
	if l != nil && now.Before(l.until) && now.Before(l.frontUntil) {
		return l, nil
	}
	rolled, listed := f.roll(ctx, root)
	var months []Contract
	until := now.Add(listTTL)
	switch {
	case !listed: // the provider lists no such product: nothing to read
	case l != nil && now.Before(l.until):
		months, until = l.months, l.until
	default:
		cs, err := f.contracts(ctx, candidates(f.src.products[root], now))
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if c.Root == root && (c.Expiration.IsZero() || c.Expiration.After(now)) {
				months = append(months, c)
			}
		}
		sort.SliceStable(months, func(i, j int) bool {
			a, b := months[i].Expiration, months[j].Expiration
			return !a.IsZero() && (b.IsZero() || a.Before(b))
		})
		if len(months) > 0 && !months[0].Expiration.IsZero() && months[0].Expiration.Before(until) {
			until = months[0].Expiration
		}
	}
	front := 0
	for front < len(months) && !months[front].Expiration.IsZero() && !months[front].Expiration.After(now) {
		front++
	}
	for i, c := range months {
		if rolled != "" && c.Symbol == rolled {
			front = i
		}
	}
	frontUntil := now.Add(frontTTL)
	if front < len(months) && !months[front].Expiration.IsZero() && months[front].Expiration.Before(frontUntil) {
		frontUntil = months[front].Expiration
	}
	l = &listing{months: months, until: until, front: front, frontUntil: frontUntil}
	f.mu.Lock()
	f.listings[root] = l
	f.mu.Unlock()
	return l, nil
}

// roll is the provider's month of root to trade now ("" when it names
// none: it has no roll, or the read failed), and whether the provider may
// list the product at all (false only when it says it lists none).
func (f *Feed) roll(ctx context.Context, root string) (string, bool) {
	sess, err := f.session(ctx)
	if err != nil {
		return "", true
	}
	rs, ok := sess.(provider.RollSession)
	if !ok {
		return "", true
	}
	name, err := rs.Front(ctx, root)
	if errors.Is(err, provider.ErrNotFound) {
		return "", false
	}
	if err != nil {
		return "", true
	}
	return strings.ToUpper(name), true
}

// contracts reads contracts by name from the provider's library, each
// with the catalog's product; names the provider does not list are left
// out, as are contracts of products the catalog does not list.
func (f *Feed) contracts(ctx context.Context, names []string) ([]Contract, error) {
	sess, err := f.session(ctx)
	if err != nil {
		return nil, err
	}
	cs, ok := sess.(provider.ContractSession)
	if !ok {
		return nil, errors.New("userfeed: the provider reads no contracts")
	}
	got, err := cs.Contracts(ctx, names)
	if err != nil {
		if errors.Is(err, provider.ErrUnauthorized) {
			f.kill()
		}
		return nil, refusalOf(err)
	}
	out := make([]Contract, 0, len(got))
	for _, k := range got {
		root, ok := market.FuturesRoot(k.Symbol, f.src.cfg.Products)
		if !ok {
			continue
		}
		p := f.src.products[root]
		out = append(out, Contract{Symbol: strings.ToUpper(k.Symbol), Root: root, Product: p, Expiration: k.Expiration.UTC(),
			TickSize: k.TickSize, ValuePerPoint: k.ValuePerPoint, Currency: k.Currency})
	}
	return out, nil
}

// resolve finds the contract a symbol names and the symbol's canonical
// name (upper case, as asked). A product refused to the login is its
// *market.FeedRefused before the library is read.
func (f *Feed) resolve(ctx context.Context, symbol string) (Contract, string, error) {
	ref, err := f.src.parse(symbol)
	if err != nil {
		return Contract{}, "", err
	}
	name := strings.ToUpper(strings.TrimSpace(symbol))
	if err := f.refusedFor(ref.root); err != nil {
		return Contract{}, name, err
	}
	l, err := f.listed(ctx, ref.root)
	if err != nil {
		return Contract{}, name, err
	}
	if ref.nth > 0 {
		if i := l.front + ref.nth - 1; i < len(l.months) {
			return l.months[i], name, nil
		}
		return Contract{}, name, ErrUnknownSymbol
	}
	for _, c := range l.months {
		if c.Symbol == ref.month {
			return c, name, nil
		}
	}
	cs, err := f.contracts(ctx, []string{ref.month}) // a month past the listing's horizon
	if err != nil {
		return Contract{}, name, err
	}
	for _, c := range cs {
		if c.Symbol == ref.month {
			return c, name, nil
		}
	}
	return Contract{}, name, ErrUnknownSymbol
}

// Contract is the contract month a futures symbol names, from the login's
// own library, once the login is entitled to the product's market data
// (else its *market.FeedRefused). ErrUnknownSymbol when the provider
// lists no such month.
func (f *Feed) Contract(ctx context.Context, symbol string) (Contract, error) {
	c, _, err := f.resolve(ctx, symbol)
	if err != nil {
		return Contract{}, err
	}
	if err := f.Entitled(ctx, c.Symbol); err != nil {
		return Contract{}, err
	}
	return c, nil
}

// Search lists the listed months of every product whose market data the
// login is entitled to and whose root, name or month matches query (a
// case-insensitive substring; empty matches all), nearest month first per
// product, in the catalog's order, at most limit. Products are checked at
// once, each by its front month's quotes; a product refused or down is
// left out.
func (f *Feed) Search(ctx context.Context, query string, limit int) []Contract {
	needle := strings.ToLower(strings.TrimSpace(query))
	type result struct {
		months []Contract
	}
	results := make([]result, len(f.src.cfg.Products))
	done := make(chan struct{}, len(f.src.cfg.Products))
	n := 0
	for i, p := range f.src.cfg.Products {
		if needle != "" && !strings.Contains(strings.ToLower(p.Root+" "+p.Name), needle) &&
			!strings.HasPrefix(needle, strings.ToLower(p.Root)) {
			continue
		}
		n++
		go func() {
			defer func() { done <- struct{}{} }()
			if f.Entitled(ctx, p.Root) != nil {
				return
			}
			if l, err := f.listed(ctx, p.Root); err == nil {
				results[i].months = l.months[l.front:]
			}
		}()
	}
	for ; n > 0; n-- {
		<-done
	}
	var out []Contract
	for _, r := range results {
		for _, c := range r.months {
			if len(out) == limit {
				return out
			}
			if needle == "" || strings.Contains(strings.ToLower(c.Symbol), needle) || strings.Contains(strings.ToLower(c.Name()), needle) {
				out = append(out, c)
			}
		}
	}
	return out
}
