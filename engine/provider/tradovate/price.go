package tradovate

import (
	"errors"
	"strconv"
	"strings"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
)

// Prices on the wire are points as JSON numbers: 110.515625 for ZN at
// 110'16.5 (110 and 16.5/32). The adapter reads and writes the number's
// text exactly (num), so a price in 32nds, whose decimal expansion is
// finite (a power of two in the denominator), is never rounded. FormatPrice
// and ParsePrice convert between points and the written fraction.

// ErrPrice is a price that is not on its product's fraction grid, or not a
// price at all.
var ErrPrice = errors.New("tradovate: price not on the product's fraction grid")

// fractionOf says how a product's prices are written. The API gives
// priceFormatType (Decimal or Fractional) and priceFormat, whose meaning
// the documentation does not state; the fraction is derived from the tick
// size instead: a Fractional product with a tick of 1/n of a point (n a
// whole number) is written in n-ths, and past 32 as thirty-seconds split
// again (n 64: halves of 32nds, 128: quarters).
func fractionOf(p product) (*provider.PriceFraction, error) {
	if p.PriceFormatType != "Fractional" {
		return nil, nil
	}
	tick := p.TickSize.dec()
	if tick.Sign() <= 0 {
		return nil, errMalformed
	}
	inv := events.Int(1).Quo(tick)
	n, err := inv.Int64()
	if err != nil || n < 2 || events.Int(n).Cmp(inv) != 0 {
		return nil, errMalformed
	}
	if n > 32 {
		if n%32 != 0 || (n/32 != 2 && n/32 != 4) {
			return nil, errMalformed
		}
		return &provider.PriceFraction{Denominator: 32, SubFraction: int(n / 32)}, nil
	}
	return &provider.PriceFraction{Denominator: int(n)}, nil
}

// FormatPrice writes price as its product is quoted: plain decimals when f
// is nil, else points, an apostrophe and the fraction's numerator, padded
// to the denominator's width, with the sub-fraction as a decimal part
// ("110'16.5" for 110.515625 in halves of 32nds, "-0'04" for -0.125). A
// price off the fraction's grid is ErrPrice.
func FormatPrice(price events.Decimal, f *provider.PriceFraction) (string, error) {
	if f == nil {
		return price.String(), nil
	}
	if f.Denominator < 2 {
		return "", ErrPrice
	}
	sign := ""
	if price.Sign() < 0 {
		sign, price = "-", price.Neg()
	}
	whole := price.Steps(events.Int(1), apd.RoundFloor)
	k := price.Sub(whole).Mul(events.Int(int64(f.Denominator)))
	if !onGrid(k, f.SubFraction) {
		return "", ErrPrice
	}
	ki := k.Steps(events.Int(1), apd.RoundFloor)
	width := len(strconv.Itoa(f.Denominator - 1))
	n := ki.String()
	for len(n) < width {
		n = "0" + n
	}
	if rest := k.Sub(ki); !rest.IsZero() {
		n += strings.TrimPrefix(rest.String(), "0")
	}
	return sign + whole.String() + "'" + n, nil
}

// ParsePrice reads a price written as FormatPrice writes it, or as plain
// decimals, exactly. A fraction off the grid, or a numerator of a whole
// point or more, is ErrPrice.
func ParsePrice(s string, f *provider.PriceFraction) (events.Decimal, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexByte(s, '\'')
	if i < 0 {
		d, err := events.ParseDecimal(s)
		if err != nil {
			return events.Decimal{}, ErrPrice
		}
		if f != nil && !onGrid(frac(d).Mul(events.Int(int64(f.Denominator))), f.SubFraction) {
			return events.Decimal{}, ErrPrice
		}
		return d, nil
	}
	if f == nil || f.Denominator < 2 {
		return events.Decimal{}, ErrPrice
	}
	ws, ks := s[:i], s[i+1:]
	neg := strings.HasPrefix(ws, "-")
	ws = strings.TrimPrefix(ws, "-")
	if ws == "" || ks == "" || strings.ContainsAny(ws, ".-+eE") || strings.ContainsAny(ks, "-+eE") {
		return events.Decimal{}, ErrPrice
	}
	whole, err := events.ParseDecimal(ws)
	if err != nil {
		return events.Decimal{}, ErrPrice
	}
	k, err := events.ParseDecimal(ks)
	if err != nil || k.Sign() < 0 || k.Cmp(events.Int(int64(f.Denominator))) >= 0 || !onGrid(k, f.SubFraction) {
		return events.Decimal{}, ErrPrice
	}
	p := whole.Add(k.Quo(events.Int(int64(f.Denominator))))
	if neg {
		p = p.Neg()
	}
	return p, nil
}

// frac is the fractional part of a non-negative or negative price's
// magnitude.
func frac(d events.Decimal) events.Decimal {
	d = d.Abs()
	return d.Sub(d.Steps(events.Int(1), apd.RoundFloor))
}

// onGrid reports whether the numerator k is a whole number of the
// sub-fraction's steps (whole when sub is 0).
func onGrid(k events.Decimal, sub int) bool {
	if sub > 0 {
		k = k.Mul(events.Int(int64(sub)))
	}
	return k.Cmp(k.Steps(events.Int(1), apd.RoundFloor)) == 0
}

// onTick reports whether price is a whole number of ticks.
func onTick(price, tick events.Decimal) bool {
	if tick.Sign() <= 0 {
		return true
	}
	n := price.Quo(tick)
	return n.Cmp(n.Steps(events.Int(1), apd.RoundFloor)) == 0
}
