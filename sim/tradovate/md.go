package tradovate

import (
	"encoding/json"
	"strings"
	"time"
)

// The market data socket's endpoints: md/subscribequote, md/unsubscribequote, md/subscribedom,
// md/unsubscribedom, md/getchart, md/cancelchart. Data arrives as the provider's "md" events
// (quotes, doms) and "chart" events.

// mdEvent is a market data event frame's message.
type mdEvent struct {
	E string `json:"e"`
	D any    `json:"d"`
}

type priceSize struct {
	Price *num   `json:"price,omitempty"`
	Size  *int64 `json:"size,omitempty"`
}

// bookSize is the size the simulator shows at its one price level on either side.
const bookSize = 10

// openInterest is the fixed open interest the quotes report.
const openInterest = 250000

func i64(v int64) *int64 { return &v }

// mdSymbol reads a request's "symbol": a contract name or a contract id.
func (s *Sim) mdSymbol(body []byte, now time.Time) (*contract, *answer) {
	var p struct {
		Symbol json.RawMessage `json:"symbol"`
	}
	if len(body) == 0 || json.Unmarshal(body, &p) != nil || len(p.Symbol) == 0 {
		a := badRequest("No usable value for symbol")
		return nil, &a
	}
	var name string
	var id int64
	var c *contract
	if json.Unmarshal(p.Symbol, &name) == nil {
		c = s.contracts[strings.ToUpper(name)]
	} else if json.Unmarshal(p.Symbol, &id) == nil {
		c = s.contractsByID[id]
	} else {
		a := badRequest("No usable value for symbol")
		return nil, &a
	}
	if c == nil {
		a := notFound("Unknown symbol " + strings.Trim(string(p.Symbol), `"`))
		return nil, &a
	}
	return c, nil
}

// entitled answers nil when the user's market data covers the contract's product, else the refusal:
// 403 with the reason as the error text (the docs do not say how the provider refuses; see
// Options.DelayedWithoutSubscription for the other shape).
func (s *Sim) entitled(u *user, c *contract) *answer {
	if u.live && u.md[c.prod.spec.Name] {
		return nil
	}
	var a answer
	if !u.live {
		a = forbidden("Market data is not available for a demo login")
	} else {
		a = forbidden("No market data subscription for " + c.prod.spec.Name)
	}
	return &a
}

// mdDispatch runs a market data request with s.mu held.
func (s *Sim) mdDispatch(req *request, u *user, now time.Time) answer {
	conn := req.conn
	switch req.endpoint {
	case "md/subscribequote", "md/subscribedom":
		c, bad := s.mdSymbol(req.body, now)
		if bad != nil {
			return *bad
		}
		if refused := s.entitled(u, c); refused != nil {
			if s.opts.DelayedWithoutSubscription {
				return ok(map[string]any{"mode": "Delayed", "subscriptionId": s.nextID(kindSubscription)})
			}
			return *refused
		}
		if req.endpoint == "md/subscribequote" {
			conn.quotes[c.id] = true
			req.after = append(req.after, func() { conn.Send(quoteFrame(c, now)) })
		} else {
			conn.doms[c.id] = true
			req.after = append(req.after, func() { conn.Send(domFrame(c, now)) })
		}
		return ok(map[string]any{"mode": "RealTime", "subscriptionId": s.nextID(kindSubscription)})
	case "md/unsubscribequote", "md/unsubscribedom":
		c, bad := s.mdSymbol(req.body, now)
		if bad != nil {
			return *bad
		}
		if req.endpoint == "md/unsubscribequote" {
			delete(conn.quotes, c.id)
		} else {
			delete(conn.doms, c.id)
		}
		return ok(map[string]any{})
	case "md/getchart":
		return s.getChart(req, u, now)
	case "md/cancelchart":
		var p struct {
			SubscriptionID int64 `json:"subscriptionId"`
		}
		if len(req.body) == 0 || json.Unmarshal(req.body, &p) != nil || p.SubscriptionID == 0 {
			return badRequest("No usable value for subscriptionId")
		}
		for id, ch := range conn.charts {
			if id == p.SubscriptionID || ch.historicalID == p.SubscriptionID {
				delete(conn.charts, id)
			}
		}
		return ok(map[string]any{})
	}
	return notFound("Not found: " + req.endpoint)
}

// chartRequest is the body of md/getchart.
type chartRequest struct {
	ChartDescription *struct {
		UnderlyingType  string `json:"underlyingType"`
		ElementSize     int    `json:"elementSize"`
		ElementSizeUnit string `json:"elementSizeUnit"`
		WithHistogram   bool   `json:"withHistogram"`
	} `json:"chartDescription"`
	TimeRange *struct {
		ClosestTimestamp string `json:"closestTimestamp"`
		ClosestTickID    *int64 `json:"closestTickId"`
		AsFarAsTimestamp string `json:"asFarAsTimestamp"`
		AsMuchAsElements int    `json:"asMuchAsElements"`
	} `json:"timeRange"`
}

// getChart answers md/getchart: {historicalId, realtimeId}, then the history as chart events under
// historicalId ending with {"id": historicalId, "eoh": true}, then the bar being built under realtimeId
// on every price change. MinuteBar and DailyBar charts in UnderlyingUnits are simulated.
func (s *Sim) getChart(req *request, u *user, now time.Time) answer {
	c, bad := s.mdSymbol(req.body, now)
	if bad != nil {
		return *bad
	}
	var p chartRequest
	if err := json.Unmarshal(req.body, &p); err != nil || p.ChartDescription == nil {
		return badRequest("No usable value for chartDescription")
	}
	if p.TimeRange == nil {
		return badRequest("No usable value for timeRange")
	}
	d := p.ChartDescription
	if d.UnderlyingType != "MinuteBar" && d.UnderlyingType != "DailyBar" {
		return badRequest("underlyingType " + d.UnderlyingType + " is not simulated")
	}
	if d.ElementSizeUnit != "UnderlyingUnits" {
		return badRequest("elementSizeUnit " + d.ElementSizeUnit + " is not simulated")
	}
	if d.ElementSize <= 0 {
		return badRequest("No usable value for elementSize")
	}
	tr := p.TimeRange
	var closest, asFar time.Time
	var err error
	if tr.ClosestTimestamp != "" {
		if closest, err = parseTime(tr.ClosestTimestamp); err != nil {
			return badRequest("No usable value for closestTimestamp")
		}
	}
	if tr.AsFarAsTimestamp != "" {
		if asFar, err = parseTime(tr.AsFarAsTimestamp); err != nil {
			return badRequest("No usable value for asFarAsTimestamp")
		}
	}
	if closest.IsZero() && asFar.IsZero() && tr.AsMuchAsElements <= 0 && tr.ClosestTickID == nil {
		return badRequest("timeRange needs at least one field")
	}
	if refused := s.entitled(u, c); refused != nil {
		return *refused
	}
	sub := &chartSub{historicalID: s.nextID(kindSubscription), realtimeID: s.nextID(kindSubscription), contract: c,
		size: d.ElementSize, daily: d.UnderlyingType == "DailyBar"}
	conn := req.conn
	conn.charts[sub.realtimeID] = sub
	bars := c.mkt.bars(sub.size, sub.daily, tr.AsMuchAsElements, closest, asFar)
	req.after = append(req.after, func() {
		conn.Send(chartFrame(map[string]any{"id": sub.historicalID, "td": tdNumber(now), "bars": barList(bars)}))
		conn.Send(chartFrame(map[string]any{"id": sub.historicalID, "eoh": true}))
	})
	return ok(map[string]any{"historicalId": sub.historicalID, "realtimeId": sub.realtimeID})
}

func parseTime(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05Z07:00"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Parse(time.RFC3339, v)
}

type barJSON struct {
	Timestamp   string `json:"timestamp"`
	Open        *num   `json:"open"`
	High        *num   `json:"high"`
	Low         *num   `json:"low"`
	Close       *num   `json:"close"`
	UpVolume    int64  `json:"upVolume"`
	DownVolume  int64  `json:"downVolume"`
	UpTicks     int64  `json:"upTicks"`
	DownTicks   int64  `json:"downTicks"`
	BidVolume   int64  `json:"bidVolume"`
	OfferVolume int64  `json:"offerVolume"`
}

func barList(cs []candle) []barJSON {
	out := make([]barJSON, 0, len(cs))
	for _, c := range cs {
		out = append(out, barJSON{Timestamp: ts(c.start), Open: dnum(c.open), High: dnum(c.high), Low: dnum(c.low),
			Close: dnum(c.close), UpVolume: c.upVolume, DownVolume: c.downVolume, UpTicks: c.upTicks, DownTicks: c.downTicks,
			BidVolume: c.bidVolume, OfferVolume: c.offerVolume})
	}
	return out
}

func chartFrame(chart map[string]any) string {
	b, _ := json.Marshal([]mdEvent{{E: "chart", D: map[string]any{"charts": []any{chart}}}})
	return "a" + string(b)
}

func quoteFrame(c *contract, now time.Time) string {
	m := c.mkt
	px := dnum(m.price)
	entries := map[string]priceSize{
		"Bid":              {Price: px, Size: i64(bookSize)},
		"Offer":            {Price: px, Size: i64(bookSize)},
		"Trade":            {Price: px, Size: i64(1)},
		"TotalTradeVolume": {Size: i64(m.volume)},
		"OpenInterest":     {Size: i64(openInterest)},
		"OpeningPrice":     {Price: dnum(m.open)},
		"HighPrice":        {Price: dnum(m.high)},
		"LowPrice":         {Price: dnum(m.low)},
		"SettlementPrice":  {Price: dnum(m.settlement)},
	}
	q := map[string]any{"timestamp": ts(now), "contractId": c.id, "entries": entries}
	b, _ := json.Marshal([]mdEvent{{E: "md", D: map[string]any{"quotes": []any{q}}}})
	return "a" + string(b)
}

func domFrame(c *contract, now time.Time) string {
	px := dnum(c.mkt.price)
	level := []priceSize{{Price: px, Size: i64(bookSize)}}
	dom := map[string]any{"contractId": c.id, "timestamp": ts(now), "bids": level, "offers": level}
	b, _ := json.Marshal([]mdEvent{{E: "md", D: map[string]any{"doms": []any{dom}}}})
	return "a" + string(b)
}

// publishQuote sends a contract's quote and DOM to the sockets subscribed to it whose session is
// valid and still entitled, with s.mu held.
func (s *Sim) publishQuote(c *contract, now time.Time) {
	var q, d string
	for conn := range s.conns {
		if !conn.md || conn.sess == nil || !conn.sess.valid(now) || s.entitled(conn.sess.user, c) != nil {
			continue
		}
		if conn.quotes[c.id] {
			if q == "" {
				q = quoteFrame(c, now)
			}
			conn.Send(q)
		}
		if conn.doms[c.id] {
			if d == "" {
				d = domFrame(c, now)
			}
			conn.Send(d)
		}
	}
}

// publishChart sends the bar being built to every real-time chart of the contract, with s.mu held.
func (s *Sim) publishChart(c *contract, now time.Time) {
	for conn := range s.conns {
		if !conn.md || conn.sess == nil || !conn.sess.valid(now) || s.entitled(conn.sess.user, c) != nil {
			continue
		}
		for _, ch := range conn.charts {
			if ch.contract != c {
				continue
			}
			bars := c.mkt.bars(ch.size, ch.daily, 1, time.Time{}, time.Time{})
			conn.Send(chartFrame(map[string]any{"id": ch.realtimeID, "td": tdNumber(now), "bars": barList(bars)}))
		}
	}
}

// subscriptionsOf counts a login's live market data subscriptions (quotes, DOMs, charts).
func (s *Sim) subscriptionsOf(u *user) int {
	n := 0
	for conn := range s.conns {
		if conn.md && conn.sess != nil && conn.sess.user == u {
			n += len(conn.quotes) + len(conn.doms) + len(conn.charts)
		}
	}
	return n
}

// MDSubscriptions is how many market data subscriptions (quotes, DOMs, real-time charts) the login
// has running on its market data sockets.
func (s *Sim) MDSubscriptions(login string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[login]
	if u == nil {
		return 0
	}
	return s.subscriptionsOf(u)
}
