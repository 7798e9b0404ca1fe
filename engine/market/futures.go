package market

import (
	"errors"
	"strings"
)

// ErrFeedRequiresConnection is what every refusal of futures prices to a
// trader wraps (FeedRefused). Routes render it as 503
// feed_requires_connection.
var ErrFeedRequiresConnection = errors.New("market: futures prices stream only from the trader's own futures source")

// The reasons a trader's futures prices are refused (FeedRefused.Reason,
// params.reason of feed_requires_connection).
const (
	ReasonLoginRequired  = "login_required"  // the trader has linked no futures login
	ReasonDemoLogin      = "demo_login"      // the trader's futures login is a demo login: it carries no market data
	ReasonNoSubscription = "no_subscription" // the login's market data subscription does not cover the product
)

// FeedRefused refuses futures prices to a trader, with its Reason (one of
// the Reason constants). Futures prices are licensed per trader: they come
// only from the trader's own login on a futures system, under that login's
// own market data subscription.
type FeedRefused struct{ Reason string }

func (e *FeedRefused) Error() string { return ErrFeedRequiresConnection.Error() + ": " + e.Reason }
func (e *FeedRefused) Unwrap() error { return ErrFeedRequiresConnection }

// RefusalReason is the reason of a FeedRefused in err's chain;
// ReasonLoginRequired for any other error wrapping ErrFeedRequiresConnection.
func RefusalReason(err error) (string, bool) {
	var fr *FeedRefused
	if errors.As(err, &fr) {
		return fr.Reason, true
	}
	if errors.Is(err, ErrFeedRequiresConnection) {
		return ReasonLoginRequired, true
	}
	return "", false
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
