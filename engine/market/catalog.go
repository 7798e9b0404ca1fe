package market

import "github.com/svc/engine/events"

// Instrument is one tradable symbol as the paper book and the catalog know it.
// An order's limit and stop prices are multiples of TickSize; its quantity is
// a multiple of LotStep and at least MinQuantity.
type Instrument struct {
	Symbol      string         `json:"symbol"`
	Name        string         `json:"name"`
	Exchange    string         `json:"exchange"`
	Type        string         `json:"type"`       // perpetual or future
	AssetClass  string         `json:"assetClass"` // crypto or futures
	TickSize    events.Decimal `json:"tickSize"`
	LotStep     events.Decimal `json:"lotStep"`
	MinQuantity events.Decimal `json:"minQuantity"`
	Multiplier  events.Decimal `json:"multiplier"`
	MaxQuantity events.Decimal `json:"maxQuantity"`
	// MinNotional is the smallest price × quantity the provider takes; zero: none.
	MinNotional events.Decimal `json:"minNotional"`
	Simulated   bool           `json:"simulated"`
	// Broker names the accounts that trade it when a provider lists it ("binance"); empty: the paper book's.
	Broker     string         `json:"broker,omitempty"`
	StartPrice events.Decimal `json:"-"`
}

// Catalog is the set of instruments the engine knows, by symbol.
type Catalog struct {
	bySymbol map[string]Instrument
	order    []string
}

// NewCatalog indexes instruments.
func NewCatalog(list []Instrument) *Catalog {
	c := &Catalog{bySymbol: map[string]Instrument{}}
	for _, in := range list {
		c.bySymbol[in.Symbol] = in
		c.order = append(c.order, in.Symbol)
	}
	return c
}

// Get finds an instrument by its exact symbol.
func (c *Catalog) Get(symbol string) (Instrument, bool) {
	in, ok := c.bySymbol[symbol]
	return in, ok
}

// All lists instruments in catalog order.
func (c *Catalog) All() []Instrument {
	out := make([]Instrument, 0, len(c.order))
	for _, s := range c.order {
		out = append(out, c.bySymbol[s])
	}
	return out
}

func d(s string) events.Decimal { return events.MustDecimal(s) }

// DefaultCrypto lists the simulated crypto perpetuals of the paper book.
func DefaultCrypto() []Instrument {
	return []Instrument{
		{Symbol: "BTC-PERP", Name: "Bitcoin perpetual (simulated)", Exchange: "SIM", Type: "perpetual", AssetClass: "crypto", TickSize: d("0.5"), LotStep: d("0.001"), MinQuantity: d("0.001"), Multiplier: d("1"), MaxQuantity: d("100"), Simulated: true, StartPrice: d("65000")},
		{Symbol: "ETH-PERP", Name: "Ether perpetual (simulated)", Exchange: "SIM", Type: "perpetual", AssetClass: "crypto", TickSize: d("0.05"), LotStep: d("0.01"), MinQuantity: d("0.01"), Multiplier: d("1"), MaxQuantity: d("1000"), Simulated: true, StartPrice: d("3200")},
		{Symbol: "SOL-PERP", Name: "Solana perpetual (simulated)", Exchange: "SIM", Type: "perpetual", AssetClass: "crypto", TickSize: d("0.01"), LotStep: d("0.1"), MinQuantity: d("0.1"), Multiplier: d("1"), MaxQuantity: d("10000"), Simulated: true, StartPrice: d("150")},
	}
}

// DefaultFutures lists the futures contracts the demo account lists. They trade
// only with a futures source, which the sandbox does not have. Contracts trade
// in whole lots: LotStep and MinQuantity 1.
func DefaultFutures() []Instrument {
	list := []Instrument{
		{Symbol: "ES", Name: "E-mini S&P 500", Exchange: "CME", Type: "future", AssetClass: "futures", TickSize: d("0.25"), Multiplier: d("50"), MaxQuantity: d("50")},
		{Symbol: "NQ", Name: "E-mini Nasdaq-100", Exchange: "CME", Type: "future", AssetClass: "futures", TickSize: d("0.25"), Multiplier: d("20"), MaxQuantity: d("50")},
		{Symbol: "CL", Name: "Crude Oil", Exchange: "NYMEX", Type: "future", AssetClass: "futures", TickSize: d("0.01"), Multiplier: d("1000"), MaxQuantity: d("50")},
		{Symbol: "GC", Name: "Gold", Exchange: "COMEX", Type: "future", AssetClass: "futures", TickSize: d("0.1"), Multiplier: d("100"), MaxQuantity: d("50")},
	}
	for i := range list {
		list[i].LotStep, list[i].MinQuantity = d("1"), d("1")
	}
	return list
}
