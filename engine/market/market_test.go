package market

import (
	"testing"
	"time"
)

func TestTimeframeGrammar(t *testing.T) {
	ok := map[string]string{"1s": "1s", "59s": "59s", "1m": "1m", "1439m": "1439m", "4h": "4h", "1d": "1d", "1D": "1d", "2W": "2w", "52w": "52w"}
	for in, canon := range ok {
		tf, err := ParseTimeframe(in)
		if err != nil || tf.String() != canon {
			t.Errorf("%q: %v %v", in, tf, err)
		}
	}
	for _, in := range []string{"", "1", "m", "0m", "01m", "60s", "1440m", "169h", "366d", "53w", "1M", "1y", "-1m", "+1m", "1.5h", "1 m", "99999m"} {
		if _, err := ParseTimeframe(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestBuckets(t *testing.T) {
	at := time.Date(2024, 6, 5, 13, 47, 31, 0, time.UTC).Unix() // a Wednesday
	cases := map[string]time.Time{
		"15s": time.Date(2024, 6, 5, 13, 47, 30, 0, time.UTC),
		"5m":  time.Date(2024, 6, 5, 13, 45, 0, 0, time.UTC),
		"4h":  time.Date(2024, 6, 5, 12, 0, 0, 0, time.UTC),
		"1d":  time.Date(2024, 6, 5, 0, 0, 0, 0, time.UTC),
		"1w":  time.Date(2024, 6, 3, 0, 0, 0, 0, time.UTC), // Monday
	}
	for s, want := range cases {
		tf, _ := ParseTimeframe(s)
		if got := tf.Bucket(at); got != want.Unix() {
			t.Errorf("%s: %v, want %v", s, time.Unix(got, 0).UTC(), want)
		}
	}
	tf, _ := ParseTimeframe("1m")
	if tf.Bucket(-1) != -60 {
		t.Error("buckets floor before the epoch")
	}
}

func TestFuturesSymbols(t *testing.T) {
	p := Products()
	for s, root := range map[string]string{"ES": "ES", "esz5": "ES", "ESZ25": "ES", "6EM2026": "6E", "ZN1!": "ZN", "RTYH6": "RTY"} {
		if got, ok := FuturesRoot(s, p); !ok || got != root {
			t.Errorf("%q: %q %v", s, got, ok)
		}
	}
	for _, s := range []string{"BTC-PERP", "ESX", "ES123", "E", "ZZ", ""} {
		if got, ok := FuturesRoot(s, p); ok {
			t.Errorf("%q read as %s", s, got)
		}
	}
	for _, pr := range p {
		if f := pr.PriceFraction; f != nil {
			if (f.Denominator != 32 && f.Denominator != 64 && f.Denominator != 128) || (f.SubFraction != 0 && f.SubFraction != 2 && f.SubFraction != 4) {
				t.Errorf("%s fraction %+v", pr.Root, f)
			}
		}
		if !pr.RollModelled && len(pr.ListedMonths) == 0 {
			t.Errorf("%s: a roll not modelled lists its months", pr.Root)
		}
	}
}
