package tradovate

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
)

// catalog caches the contract library's entities by id (and contracts by
// name): they never change, and every login of the environment sees the
// same library. Safe for concurrent use.
type catalog struct {
	mu         sync.Mutex
	contracts  map[eid]contract
	byName     map[string]contract
	maturities map[eid]contractMaturity
	products   map[eid]product
	currencies map[eid]string
}

func newCatalog() *catalog {
	return &catalog{contracts: map[eid]contract{}, byName: map[string]contract{}, maturities: map[eid]contractMaturity{},
		products: map[eid]product{}, currencies: map[eid]string{}}
}

func (c *catalog) putContract(k contract) {
	if k.ID <= 0 || k.Name == "" {
		return
	}
	c.mu.Lock()
	c.contracts[k.ID] = k
	c.byName[strings.ToUpper(k.Name)] = k
	c.mu.Unlock()
}

// contractByID reads a contract (GET /contract/item?id=), cached.
func (l *login) contractByID(ctx context.Context, cid eid) (contract, error) {
	c := l.p.cat
	c.mu.Lock()
	k, ok := c.contracts[cid]
	c.mu.Unlock()
	if ok {
		return k, nil
	}
	if err := l.get(ctx, "/contract/item", idQuery("id", cid), &k); err != nil {
		return contract{}, err
	}
	if k.ID != cid || k.Name == "" {
		return contract{}, provider.NewUnavailable(200, 0, errMalformed)
	}
	c.putContract(k)
	return k, nil
}

// contractName is a contract's name (its symbol, ESZ5), cached.
func (l *login) contractName(ctx context.Context, cid eid) (string, error) {
	k, err := l.contractByID(ctx, cid)
	return k.Name, err
}

// contractByName finds a contract by its name (GET /contract/find?name=),
// cached; *provider.NotFound when the API knows none.
func (l *login) contractByName(ctx context.Context, name string) (contract, error) {
	c := l.p.cat
	c.mu.Lock()
	k, ok := c.byName[strings.ToUpper(name)]
	c.mu.Unlock()
	if ok {
		return k, nil
	}
	if err := l.get(ctx, "/contract/find", query("name", name), &k); err != nil {
		return contract{}, err
	}
	if k.ID <= 0 || !strings.EqualFold(k.Name, name) {
		return contract{}, &provider.NotFound{}
	}
	c.putContract(k)
	return k, nil
}

// maturity reads GET /contractMaturity/item?id=, cached.
func (l *login) maturity(ctx context.Context, mid eid) (contractMaturity, error) {
	return cachedItem(ctx, l, l.p.cat.maturities, "/contractMaturity/item", mid, func(m contractMaturity) bool { return m.ID == mid })
}

// productOf reads GET /product/item?id=, cached.
func (l *login) productOf(ctx context.Context, pid eid) (product, error) {
	return cachedItem(ctx, l, l.p.cat.products, "/product/item", pid, func(p product) bool { return p.ID == pid })
}

// cachedItem reads GET path?id= through the catalog's cache (a map of
// catalog, guarded by its mu). An answer ok does not take is
// *provider.Unavailable, and is not kept.
func cachedItem[T any](ctx context.Context, l *login, cache map[eid]T, path string, id eid, ok func(T) bool) (T, error) {
	c := l.p.cat
	c.mu.Lock()
	v, found := cache[id]
	c.mu.Unlock()
	if found {
		return v, nil
	}
	if err := l.get(ctx, path, idQuery("id", id), &v); err != nil {
		return v, err
	}
	if !ok(v) {
		return v, provider.NewUnavailable(200, 0, errMalformed)
	}
	c.mu.Lock()
	cache[id] = v
	c.mu.Unlock()
	return v, nil
}

// putSpec keeps the maturities and products a sync answer carries.
func (c *catalog) putSpec(ms []contractMaturity, ps []product) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range ms {
		if m.ID > 0 {
			c.maturities[m.ID] = m
		}
	}
	for _, p := range ps {
		if p.ID > 0 {
			c.products[p.ID] = p
		}
	}
}

// valuePerPoint is a contract's currency per point of price per contract:
// its product's valuePerPoint (contract, maturity, product, each read
// through the catalog's cache). An answer without one is
// *provider.Unavailable.
func (l *login) valuePerPoint(ctx context.Context, cid eid) (events.Decimal, error) {
	k, err := l.contractByID(ctx, cid)
	if err != nil {
		return events.Decimal{}, err
	}
	m, err := l.maturity(ctx, k.ContractMaturityID)
	if err != nil {
		return events.Decimal{}, err
	}
	p, err := l.productOf(ctx, m.ProductID)
	if err != nil {
		return events.Decimal{}, err
	}
	if !p.ValuePerPoint.ok || p.ValuePerPoint.dec().Sign() <= 0 {
		return events.Decimal{}, provider.NewUnavailable(200, 0, errMalformed)
	}
	return p.ValuePerPoint.dec(), nil
}

// currencyName reads GET /currency/item?id=, cached; "USD" for the
// products that name none.
func (l *login) currencyName(ctx context.Context, cur eid) (string, error) {
	if cur <= 0 {
		return "USD", nil
	}
	c := l.p.cat
	c.mu.Lock()
	n, ok := c.currencies[cur]
	c.mu.Unlock()
	if ok {
		return n, nil
	}
	var k currency
	if err := l.get(ctx, "/currency/item", idQuery("id", cur), &k); err != nil {
		return "", err
	}
	if k.Name == "" {
		return "", provider.NewUnavailable(200, 0, errMalformed)
	}
	c.mu.Lock()
	c.currencies[cur] = k.Name
	c.mu.Unlock()
	return k.Name, nil
}

// Contracts implements provider.ContractSession: each symbol's contract
// (contract/find), its maturity and its product (tick size, value per
// point, price format). Symbols the API does not know are left out.
func (s *session) Contracts(ctx context.Context, symbols []string) ([]provider.Contract, error) {
	out := make([]provider.Contract, 0, len(symbols))
	for _, sym := range symbols {
		k, err := s.l.contractByName(ctx, sym)
		if errors.Is(err, provider.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		m, err := s.l.maturity(ctx, k.ContractMaturityID)
		if err != nil {
			return nil, err
		}
		p, err := s.l.productOf(ctx, m.ProductID)
		if err != nil {
			return nil, err
		}
		cur, err := s.l.currencyName(ctx, p.CurrencyID)
		if err != nil {
			return nil, err
		}
		c, err := contractOf(k, m, p, cur)
		if err != nil {
			return nil, provider.NewUnavailable(200, 0, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// contractOf is a contract with its product's facts. Futures trade in whole
// contracts: the lot step and minimum quantity are 1.
func contractOf(k contract, m contractMaturity, p product, cur string) (provider.Contract, error) {
	if !p.TickSize.ok || p.TickSize.dec().Sign() <= 0 || !p.ValuePerPoint.ok {
		return provider.Contract{}, errMalformed
	}
	f, err := fractionOf(p)
	if err != nil {
		return provider.Contract{}, err
	}
	one := events.Int(1)
	return provider.Contract{
		Instrument: provider.Instrument{Symbol: k.Name, Base: p.Name, Quote: cur, Margin: cur,
			Trading: p.Status == "" || p.Status == "ReadyToTrade", TickSize: p.TickSize.dec(), LotStep: one, MinQuantity: one},
		ContractID: k.ID.String(), Product: p.Name, Currency: cur, ValuePerPoint: p.ValuePerPoint.dec(), Fraction: f,
		Expiration: m.ExpirationDate,
	}, nil
}
