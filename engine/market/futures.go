package market

import (
	"context"
	"errors"
	"strings"
)

// ErrFeedRequiresConnection is the answer of a FuturesSource for a trader who
// has no futures connection of their own. Routes render it as 503
// feed_requires_connection.
var ErrFeedRequiresConnection = errors.New("market: futures prices stream only from the trader's own futures source")

// FuturesSource hands out futures prices per trader. Futures prices are
// licensed per trader: each trader's feed comes from that trader's own login
// on a futures system, under their own market-data subscription. A real
// source implements this interface; the routes never change.
type FuturesSource interface {
	// Open returns trader's futures feed, or ErrFeedRequiresConnection when the
	// trader has none. trader is the tenant (or the trader acted for) of the request.
	Open(ctx context.Context, trader string) (FuturesFeed, error)
}

// FuturesFeed is one trader's licensed futures connection.
type FuturesFeed interface {
	Feed
	// Contracts lists the contracts the connection serves (symbol search and symbol info).
	Contracts() []Instrument
	// History returns up to countBack bars of symbol at tf ending before to (Unix
	// seconds; 0: now), oldest first.
	History(ctx context.Context, symbol string, tf Timeframe, countBack int, to int64) ([]Bar, error)
}

// NoFutures is the FuturesSource of a deployment with no futures connection
// configured (the sandbox): every Open answers ErrFeedRequiresConnection.
type NoFutures struct{}

// Open always refuses.
func (NoFutures) Open(context.Context, string) (FuturesFeed, error) {
	return nil, ErrFeedRequiresConnection
}

// Fraction is how a product quoted in fractions of a point is written:
// Denominator 32, 64 or 128, and SubFraction 2 or 4 where the writing divides
// the fraction again (ZN: halves of thirty-seconds, "110'16.5").
type Fraction struct {
	Denominator int `json:"denominator"`
	SubFraction int `json:"subFraction,omitempty"`
}

// Product is one row of the futures product catalog: exchange facts of a root.
type Product struct {
	Root       string `json:"root"`
	Name       string `json:"name"`
	Exchange   string `json:"exchange"`
	AssetClass string `json:"assetClass"` // equity_index, energy, metals, interest_rates, fx
	Currency   string `json:"currency"`
	TickSize   string `json:"tickSize"`  // price points per tick
	TickValue  string `json:"tickValue"` // currency per tick per contract
	Multiplier string `json:"multiplier"`
	// LotStep and MinQuantity are the quantity increment and the smallest
	// order, in contracts: whole contracts, "1" for every product.
	LotStep     string `json:"lotStep"`
	MinQuantity string `json:"minQuantity"`
	// RollCycle lists the month codes of the contracts the roll steps through (HMUZ: quarterly).
	RollCycle string `json:"rollCycle"`
	// RollModelled is false for products whose roll the engine does not model;
	// those list their ListedMonths instead.
	RollModelled  bool      `json:"rollModelled"`
	ListedMonths  []string  `json:"listedMonths,omitempty"`
	PriceFraction *Fraction `json:"priceFraction,omitempty"`
}

// Products is the futures product catalog: CME Group contract specifications.
// Every product trades in whole contracts (LotStep and MinQuantity "1").
func Products() []Product {
	quarterly := "HMUZ"
	ps := []Product{
		{Root: "ES", Name: "E-mini S&P 500", Exchange: "CME", AssetClass: "equity_index", Currency: "USD", TickSize: "0.25", TickValue: "12.50", Multiplier: "50", RollCycle: quarterly, RollModelled: true},
		{Root: "NQ", Name: "E-mini Nasdaq-100", Exchange: "CME", AssetClass: "equity_index", Currency: "USD", TickSize: "0.25", TickValue: "5.00", Multiplier: "20", RollCycle: quarterly, RollModelled: true},
		{Root: "YM", Name: "E-mini Dow Jones Industrial Average ($5)", Exchange: "CBOT", AssetClass: "equity_index", Currency: "USD", TickSize: "1", TickValue: "5.00", Multiplier: "5", RollCycle: quarterly, RollModelled: true},
		{Root: "RTY", Name: "E-mini Russell 2000", Exchange: "CME", AssetClass: "equity_index", Currency: "USD", TickSize: "0.10", TickValue: "5.00", Multiplier: "50", RollCycle: quarterly, RollModelled: true},
		{Root: "CL", Name: "Crude Oil (WTI)", Exchange: "NYMEX", AssetClass: "energy", Currency: "USD", TickSize: "0.01", TickValue: "10.00", Multiplier: "1000", RollCycle: "FGHJKMNQUVXZ", RollModelled: false,
			ListedMonths: []string{"F", "G", "H", "J", "K", "M", "N", "Q", "U", "V", "X", "Z"}},
		{Root: "GC", Name: "Gold", Exchange: "COMEX", AssetClass: "metals", Currency: "USD", TickSize: "0.10", TickValue: "10.00", Multiplier: "100", RollCycle: "GJMQVZ", RollModelled: false,
			ListedMonths: []string{"F", "G", "H", "J", "K", "M", "N", "Q", "U", "V", "X", "Z"}},
		{Root: "ZN", Name: "10-Year U.S. Treasury Note", Exchange: "CBOT", AssetClass: "interest_rates", Currency: "USD", TickSize: "0.015625", TickValue: "15.625", Multiplier: "1000", RollCycle: quarterly, RollModelled: true,
			PriceFraction: &Fraction{Denominator: 32, SubFraction: 2}},
		{Root: "ZB", Name: "U.S. Treasury Bond", Exchange: "CBOT", AssetClass: "interest_rates", Currency: "USD", TickSize: "0.03125", TickValue: "31.25", Multiplier: "1000", RollCycle: quarterly, RollModelled: true,
			PriceFraction: &Fraction{Denominator: 32}},
		{Root: "ZF", Name: "5-Year U.S. Treasury Note", Exchange: "CBOT", AssetClass: "interest_rates", Currency: "USD", TickSize: "0.0078125", TickValue: "7.8125", Multiplier: "1000", RollCycle: quarterly, RollModelled: true,
			PriceFraction: &Fraction{Denominator: 32, SubFraction: 4}},
		{Root: "6E", Name: "Euro FX", Exchange: "CME", AssetClass: "fx", Currency: "USD", TickSize: "0.00005", TickValue: "6.25", Multiplier: "125000", RollCycle: quarterly, RollModelled: true},
	}
	for i := range ps {
		ps[i].LotStep, ps[i].MinQuantity = "1", "1"
	}
	return ps
}

// monthCodes are the futures month letters, January to December.
const monthCodes = "FGHJKMNQUVXZ"

// FuturesRoot reports the product root a futures symbol names: the root itself
// ("ES"), a contract ("ESZ5", "ESZ25", "6EM2026"), or a continuous symbol ("ES1!").
func FuturesRoot(symbol string, products []Product) (string, bool) {
	s := strings.ToUpper(strings.TrimSpace(symbol))
	best := ""
	for _, p := range products {
		if !strings.HasPrefix(s, p.Root) || len(p.Root) <= len(best) {
			continue
		}
		rest := s[len(p.Root):]
		if rest == "" || isContractSuffix(rest) {
			best = p.Root
		}
	}
	return best, best != ""
}

func isContractSuffix(rest string) bool {
	if len(rest) >= 2 && rest[len(rest)-1] == '!' { // continuous: ES1!, ES2!
		return allDigits(rest[:len(rest)-1])
	}
	if len(rest) < 2 || !strings.ContainsRune(monthCodes, rune(rest[0])) {
		return false
	}
	y := rest[1:]
	return (len(y) == 1 || len(y) == 2 || len(y) == 4) && allDigits(y)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
