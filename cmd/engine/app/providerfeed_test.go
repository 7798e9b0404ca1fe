package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
)

// flakySource answers its instruments, or err when set.
type flakySource struct {
	ins []provider.Instrument
	err error
}

func (s *flakySource) Instruments(context.Context) ([]provider.Instrument, error) {
	return s.ins, s.err
}
func (s *flakySource) Quotes(context.Context, []string) (<-chan provider.Quote, error) {
	return nil, s.err
}

// The instruments read last are kept and answered when the provider
// cannot be read; with none kept (or a file that is not theirs) the
// provider's error stands.
func TestInstrumentsReadLastServeAStartWhileTheExchangeIsDown(t *testing.T) {
	down := provider.NewUnavailable(0, 0, errors.New("connection refused"))
	btc := provider.Instrument{Symbol: "BTCUSDT", Base: "BTC", Quote: "USDT", Margin: "USDT", Perpetual: true, Trading: true,
		TickSize: events.MustDecimal("0.10"), LotStep: events.MustDecimal("0.001"), MinQuantity: events.MustDecimal("0.001"),
		MaxQuantity: events.MustDecimal("1000"), MinNotional: events.MustDecimal("100")}
	for _, tc := range []struct {
		name    string
		file    string // written before, when not ""
		readOK  bool   // the exchange answers once before it goes down
		wantErr bool
	}{
		{"read once, then down: the kept instruments", "", true, false},
		{"never read: the exchange's error", "", false, true},
		{"a file that is not JSON: the exchange's error", "{not json", false, true},
		{"a file with no instruments: the exchange's error", `{"readAt":"2026-12-06T00:00:00Z","instruments":[]}`, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "providers", "binance-instruments.json")
			if tc.file != "" {
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			src := &flakySource{ins: []provider.Instrument{btc}}
			c := &cachedInstruments{PublicSource: src, path: path}
			if tc.readOK {
				if got, err := c.Instruments(context.Background()); err != nil || len(got) != 1 {
					t.Fatalf("with the exchange up: %v %v", got, err)
				}
			}
			src.err = down
			got, err := c.Instruments(context.Background())
			if tc.wantErr {
				if !errors.Is(err, provider.ErrUnavailable) {
					t.Fatalf("got %v, %v; want the exchange's error", got, err)
				}
				return
			}
			if err != nil || len(got) != 1 {
				t.Fatalf("with the exchange down: %v %v", got, err)
			}
			g := got[0]
			if g.Symbol != btc.Symbol || !g.Perpetual || !g.Trading || g.TickSize.Cmp(btc.TickSize) != 0 || g.LotStep.Cmp(btc.LotStep) != 0 ||
				g.MinQuantity.Cmp(btc.MinQuantity) != 0 || g.MaxQuantity.Cmp(btc.MaxQuantity) != 0 || g.MinNotional.Cmp(btc.MinNotional) != 0 {
				t.Fatalf("kept %+v, read %+v", g, btc)
			}
			if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("the kept file: %v %v", st, err)
			}
		})
	}
}
