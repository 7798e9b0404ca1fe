package binance

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/sim/internal/dec"
)

// Symbol describes one perpetual the simulator lists: its filters as exchangeInfo shows them and the
// price it starts at.
type Symbol struct {
	Name              string // "BTCUSDT"
	Base, Quote       string // "BTC", "USDT"
	PricePrecision    int
	QuantityPrecision int
	TickSize          string
	StepSize          string
	MinQty            string
	MaxQty            string
	MinNotional       string
	Price             string // starting mark/last price
}

// DefaultSymbols are the perpetuals a simulator lists unless Options.Symbols says otherwise; their
// filters are those the exchange publishes for them.
func DefaultSymbols() []Symbol {
	return []Symbol{
		{Name: "BTCUSDT", Base: "BTC", Quote: "USDT", PricePrecision: 2, QuantityPrecision: 3,
			TickSize: "0.10", StepSize: "0.001", MinQty: "0.001", MaxQty: "1000", MinNotional: "100", Price: "60000"},
		{Name: "ETHUSDT", Base: "ETH", Quote: "USDT", PricePrecision: 2, QuantityPrecision: 3,
			TickSize: "0.01", StepSize: "0.001", MinQty: "0.001", MaxQty: "10000", MinNotional: "20", Price: "3000"},
		{Name: "SOLUSDT", Base: "SOL", Quote: "USDT", PricePrecision: 4, QuantityPrecision: 0,
			TickSize: "0.0100", StepSize: "1", MinQty: "1", MaxQty: "1000000", MinNotional: "5", Price: "150"},
	}
}

// market is one listed symbol with its driven price and minute candles.
type market struct {
	spec                Symbol
	tick, step, minQty  *apd.Decimal
	maxQty, minNotional *apd.Decimal
	price               *apd.Decimal // the last trade's price (the contract price)
	mark                *apd.Decimal // the mark price: SetPrice moves both, SetMarkPrice the mark alone
	updateID            int64
	candles             []candle // 1m candles, oldest first, at most maxCandles
}

type candle struct {
	start                  int64 // ms
	open, high, low, close *apd.Decimal
	volume, quoteVolume    *apd.Decimal
	trades                 int64
}

const maxCandles = 1500

func newMarket(s Symbol, now time.Time) *market {
	m := &market{spec: s, tick: dec.Must(s.TickSize), step: dec.Must(s.StepSize), minQty: dec.Must(s.MinQty),
		maxQty: dec.Must(s.MaxQty), minNotional: dec.Must(s.MinNotional), price: dec.Must(s.Price), mark: dec.Must(s.Price)}
	m.observe(m.price, now)
	return m
}

// observe records a price in the minute candle of now.
func (m *market) observe(p *apd.Decimal, now time.Time) {
	start := now.Truncate(time.Minute).UnixMilli()
	n := len(m.candles)
	if n > 0 && m.candles[n-1].start == start {
		c := &m.candles[n-1]
		c.close = p
		if p.Cmp(c.high) > 0 {
			c.high = p
		}
		if p.Cmp(c.low) < 0 {
			c.low = p
		}
		return
	}
	m.candles = append(m.candles, candle{start: start, open: p, high: p, low: p, close: p, volume: dec.Zero(), quoteVolume: dec.Zero()})
	if len(m.candles) > maxCandles {
		m.candles = m.candles[len(m.candles)-maxCandles:]
	}
}

// trade adds a fill's volume to the current candle.
func (m *market) trade(qty, quote *apd.Decimal, now time.Time) {
	m.observe(m.price, now)
	c := &m.candles[len(m.candles)-1]
	c.volume = dec.Add(c.volume, qty)
	c.quoteVolume = dec.Add(c.quoteVolume, quote)
	c.trades++
}

func (m *market) px(d *apd.Decimal) string  { return dec.Fixed(d, m.spec.PricePrecision) }
func (m *market) qty(d *apd.Decimal) string { return dec.Fixed(d, m.spec.QuantityPrecision) }

var intervals = map[string]time.Duration{
	"1m": time.Minute, "3m": 3 * time.Minute, "5m": 5 * time.Minute, "15m": 15 * time.Minute,
	"30m": 30 * time.Minute, "1h": time.Hour, "2h": 2 * time.Hour, "4h": 4 * time.Hour,
	"6h": 6 * time.Hour, "8h": 8 * time.Hour, "12h": 12 * time.Hour, "1d": 24 * time.Hour,
}

// klines folds the minute candles into candles of the interval, oldest first.
func (m *market) klines(iv time.Duration, limit int, start, end int64) []candle {
	var out []candle
	for _, c := range m.candles {
		b := c.start - c.start%iv.Milliseconds()
		if (start > 0 && b+iv.Milliseconds() <= start) || (end > 0 && b > end) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].start == b {
			o := &out[n-1]
			o.close = c.close
			if c.high.Cmp(o.high) > 0 {
				o.high = c.high
			}
			if c.low.Cmp(o.low) < 0 {
				o.low = c.low
			}
			o.volume = dec.Add(o.volume, c.volume)
			o.quoteVolume = dec.Add(o.quoteVolume, c.quoteVolume)
			o.trades += c.trades
			continue
		}
		cc := c
		cc.start = b
		out = append(out, cc)
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

func (m *market) klineRow(c candle, iv time.Duration) []any {
	return []any{c.start, m.px(c.open), m.px(c.high), m.px(c.low), m.px(c.close), m.qty(c.volume),
		c.start + iv.Milliseconds() - 1, dec.Fixed(c.quoteVolume, 8), c.trades, "0", "0", "0"}
}

var orderTypeList = []string{"LIMIT", "MARKET", "STOP", "STOP_MARKET", "TAKE_PROFIT", "TAKE_PROFIT_MARKET"}

func (s *Sim) exchangeInfo(c *call) (any, error) {
	symbols := make([]any, 0, len(s.order))
	for _, name := range s.order {
		m := s.markets[name]
		sp := m.spec
		symbols = append(symbols, map[string]any{
			"symbol": sp.Name, "pair": sp.Name, "contractType": "PERPETUAL", "deliveryDate": int64(4133404800000),
			"onboardDate": int64(1569398400000), "status": "TRADING", "maintMarginPercent": "2.5000",
			"requiredMarginPercent": "5.0000", "baseAsset": sp.Base, "quoteAsset": sp.Quote, "marginAsset": sp.Quote,
			"pricePrecision": sp.PricePrecision, "quantityPrecision": sp.QuantityPrecision,
			"baseAssetPrecision": 8, "quotePrecision": 8, "underlyingType": "COIN", "underlyingSubType": []string{},
			"settlePlan": 0, "triggerProtect": "0.0500", "liquidationFee": "0.012500", "marketTakeBound": "0.05",
			"maxMoveOrderLimit": 10000,
			"filters": []map[string]any{
				{"filterType": "PRICE_FILTER", "minPrice": sp.TickSize, "maxPrice": "4529764", "tickSize": sp.TickSize},
				{"filterType": "LOT_SIZE", "minQty": sp.MinQty, "maxQty": sp.MaxQty, "stepSize": sp.StepSize},
				{"filterType": "MARKET_LOT_SIZE", "minQty": sp.MinQty, "maxQty": sp.MaxQty, "stepSize": sp.StepSize},
				{"filterType": "MAX_NUM_ORDERS", "limit": 200},
				{"filterType": "MAX_NUM_ALGO_ORDERS", "limit": 10},
				{"filterType": "MIN_NOTIONAL", "notional": sp.MinNotional},
				{"filterType": "PERCENT_PRICE", "multiplierUp": "1.0500", "multiplierDown": "0.9500", "multiplierDecimal": "4"},
			},
			// The exchange names the list "orderTypes"; go-binance's Symbol reads "orderType". Both
			// are sent so that the library's field is filled too.
			"orderTypes":  orderTypeList,
			"orderType":   orderTypeList,
			"timeInForce": []string{"GTC", "IOC", "FOK", "GTX"},
		})
	}
	return map[string]any{
		"timezone": "UTC", "serverTime": c.now.UnixMilli(), "futuresType": "U_MARGINED",
		"rateLimits": []map[string]any{
			{"rateLimitType": "REQUEST_WEIGHT", "interval": "MINUTE", "intervalNum": 1, "limit": s.opts.WeightLimit},
			{"rateLimitType": "ORDERS", "interval": "MINUTE", "intervalNum": 1, "limit": s.opts.OrderLimit1m},
			{"rateLimitType": "ORDERS", "interval": "SECOND", "intervalNum": 10, "limit": s.opts.OrderLimit10s},
		},
		"exchangeFilters": []any{},
		"assets": []map[string]any{
			{"asset": "USDT", "marginAvailable": true, "autoAssetExchange": "-10000"},
			{"asset": "USDC", "marginAvailable": true, "autoAssetExchange": "-10000"},
			{"asset": "BTC", "marginAvailable": true, "autoAssetExchange": "-0.10000000"},
		},
		"symbols": symbols,
	}, nil
}

// symbolParam returns the markets a request names with an optional "symbol", or all of them.
func (s *Sim) symbolParam(c *call, required bool) ([]*market, error) {
	name := c.params.Get("symbol")
	if name == "" {
		if required {
			return nil, errMandatory("symbol")
		}
		out := make([]*market, 0, len(s.order))
		for _, n := range s.order {
			out = append(out, s.markets[n])
		}
		return out, nil
	}
	m, ok := s.markets[strings.ToUpper(name)]
	if !ok {
		return nil, errBadSymbol
	}
	return []*market{m}, nil
}

func (s *Sim) premiumIndex(c *call) (any, error) {
	ms, err := s.symbolParam(c, false)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(ms))
	for _, m := range ms {
		out = append(out, map[string]any{
			"symbol": m.spec.Name, "markPrice": dec.Fixed(m.mark, 8), "indexPrice": dec.Fixed(m.mark, 8),
			"estimatedSettlePrice": dec.Fixed(m.mark, 8), "lastFundingRate": "0.00010000", "interestRate": "0.00010000",
			"nextFundingTime": nextFunding(c.now), "time": c.now.UnixMilli(),
		})
	}
	if c.params.Get("symbol") != "" {
		return out[0], nil
	}
	return out, nil
}

func nextFunding(now time.Time) int64 {
	return now.UTC().Truncate(8 * time.Hour).Add(8 * time.Hour).UnixMilli()
}

func (s *Sim) bookTicker(c *call) (any, error) {
	ms, err := s.symbolParam(c, false)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(ms))
	for _, m := range ms {
		out = append(out, map[string]any{
			"symbol": m.spec.Name, "bidPrice": m.px(m.price), "bidQty": "10.000", "askPrice": m.px(m.price),
			"askQty": "10.000", "time": c.now.UnixMilli(), "lastUpdateId": m.updateID,
		})
	}
	if c.params.Get("symbol") != "" {
		return out[0], nil
	}
	return out, nil
}

func (s *Sim) tickerPrice(c *call) (any, error) {
	ms, err := s.symbolParam(c, false)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(ms))
	for _, m := range ms {
		out = append(out, map[string]any{"symbol": m.spec.Name, "price": m.px(m.price), "time": c.now.UnixMilli()})
	}
	if c.params.Get("symbol") != "" {
		return out[0], nil
	}
	return out, nil
}

func (s *Sim) klines(c *call) (any, error) {
	ms, err := s.symbolParam(c, true)
	if err != nil {
		return nil, err
	}
	ivName := c.params.Get("interval")
	if ivName == "" {
		return nil, errMandatory("interval")
	}
	iv, ok := intervals[ivName]
	if !ok {
		return nil, refuse(http.StatusBadRequest, codeBadInterval, "Invalid interval.")
	}
	limit := 500
	if v := c.params.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1500 {
			return nil, errInvalidValue("limit")
		}
		limit = n
	}
	start, _ := strconv.ParseInt(c.params.Get("startTime"), 10, 64)
	end, _ := strconv.ParseInt(c.params.Get("endTime"), 10, 64)
	m := ms[0]
	rows := make([]any, 0)
	for _, k := range m.klines(iv, limit, start, end) {
		rows = append(rows, m.klineRow(k, iv))
	}
	return rows, nil
}
