package market

import (
	"strconv"

	"github.com/cockroachdb/apd/v3"
)

// Bar is one OHLCV bucket. Time is the bucket's opening second (Unix, UTC).
// Prices and volume are exact decimals (apd), never floats.
type Bar struct {
	Time   int64
	Open   apd.Decimal
	High   apd.Decimal
	Low    apd.Decimal
	Close  apd.Decimal
	Volume apd.Decimal
}

// NewBar opens a bar at time with one price and a volume.
func NewBar(time int64, price, volume *apd.Decimal) Bar {
	b := Bar{Time: time}
	b.Open.Set(price)
	b.High.Set(price)
	b.Low.Set(price)
	b.Close.Set(price)
	b.Volume.Set(volume)
	return b
}

// Trade folds one price and volume into b (the newest price closes it).
func (b *Bar) Trade(price, volume *apd.Decimal) {
	if price.Cmp(&b.High) > 0 {
		b.High.Set(price)
	}
	if price.Cmp(&b.Low) < 0 {
		b.Low.Set(price)
	}
	b.Close.Set(price)
	if !volume.IsZero() {
		_, _ = apd.BaseContext.Add(&b.Volume, &b.Volume, volume)
	}
}

// Merge folds a later bar of the same bucket into b.
func (b *Bar) Merge(later *Bar) {
	if later.High.Cmp(&b.High) > 0 {
		b.High.Set(&later.High)
	}
	if later.Low.Cmp(&b.Low) < 0 {
		b.Low.Set(&later.Low)
	}
	b.Close.Set(&later.Close)
	if !later.Volume.IsZero() {
		_, _ = apd.BaseContext.Add(&b.Volume, &b.Volume, &later.Volume)
	}
}

// AppendJSON appends b as {"time","open","high","low","close","volume"}:
// time in Unix seconds, decimals as strings without trailing zeros.
func (b *Bar) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"time":`...)
	dst = strconv.AppendInt(dst, b.Time, 10)
	dst = append(dst, `,"open":`...)
	dst = AppendDecimal(dst, &b.Open)
	dst = append(dst, `,"high":`...)
	dst = AppendDecimal(dst, &b.High)
	dst = append(dst, `,"low":`...)
	dst = AppendDecimal(dst, &b.Low)
	dst = append(dst, `,"close":`...)
	dst = AppendDecimal(dst, &b.Close)
	dst = append(dst, `,"volume":`...)
	dst = AppendDecimal(dst, &b.Volume)
	return append(dst, '}')
}

// AppendDecimal appends d as a quoted plain decimal string without trailing
// fractional zeros ("64998.50" as "64998.5").
func AppendDecimal(dst []byte, d *apd.Decimal) []byte {
	dst = append(dst, '"')
	if d.Exponent < 0 {
		var r apd.Decimal
		r.Reduce(d)
		dst = r.Append(dst, 'f')
	} else {
		dst = d.Append(dst, 'f')
	}
	return append(dst, '"')
}
