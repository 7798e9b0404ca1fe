package tradovate

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/svc/engine/engine/provider"
)

// chartRequest is md/getchart's body: the documented chartDescription
// (underlyingType MinuteBar or DailyBar, elementSize, elementSizeUnit
// UnderlyingUnits) and timeRange (closestTimestamp, asMuchAsElements).
type chartRequest struct {
	Symbol           string `json:"symbol"`
	ChartDescription struct {
		UnderlyingType  string `json:"underlyingType"`
		ElementSize     int    `json:"elementSize"`
		ElementSizeUnit string `json:"elementSizeUnit"`
		WithHistogram   bool   `json:"withHistogram"`
	} `json:"chartDescription"`
	TimeRange struct {
		ClosestTimestamp string `json:"closestTimestamp,omitempty"`
		AsMuchAsElements int    `json:"asMuchAsElements"`
	} `json:"timeRange"`
}

// chartAnswer is md/getchart's answer: the ids its chart events carry.
type chartAnswer struct {
	HistoricalID eid `json:"historicalId"`
	RealtimeID   eid `json:"realtimeId"`
}

// chartData is a chart event's data.
type chartData struct {
	Charts []struct {
		ID   eid  `json:"id"`
		EOH  bool `json:"eoh"`
		Bars []struct {
			Timestamp  time.Time `json:"timestamp"`
			Open       num       `json:"open"`
			High       num       `json:"high"`
			Low        num       `json:"low"`
			Close      num       `json:"close"`
			UpVolume   num       `json:"upVolume"`
			DownVolume num       `json:"downVolume"`
		} `json:"bars"`
	} `json:"charts"`
}

// maxBars bounds one chart read.
const maxBars = 10000

var _ provider.ChartSession = (*session)(nil)

// Bars implements provider.ChartSession with md/getchart on a market-data
// socket of its own: the history's chart events (until the end-of-history
// mark) as bars, oldest first; the real-time chart is then canceled
// (md/cancelchart) and the socket closed. Volume is the bar's up and down
// volume. Entitlement is as Quotes: a demo login, and a chart the API
// refuses, are *provider.NotEntitled.
func (s *session) Bars(ctx context.Context, r provider.BarRequest) ([]provider.Bar, error) {
	if s.l.token().Environment != provider.EnvLive {
		return nil, &provider.NotEntitled{Reason: provider.EntitlementDemoLogin}
	}
	if r.Count <= 0 || r.Count > maxBars || (!r.Daily && r.Minutes <= 0) {
		return nil, &provider.Unsupported{Field: "bars", Value: r.Symbol}
	}
	k, err := s.l.contractByName(ctx, r.Symbol)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, &provider.Unsupported{Field: "symbol", Value: r.Symbol}
	}
	if err != nil {
		return nil, err
	}
	var req chartRequest
	req.Symbol = k.Name
	req.ChartDescription.UnderlyingType, req.ChartDescription.ElementSize = "MinuteBar", r.Minutes
	if r.Daily {
		req.ChartDescription.UnderlyingType, req.ChartDescription.ElementSize = "DailyBar", 1
	}
	req.ChartDescription.ElementSizeUnit = "UnderlyingUnits"
	req.TimeRange.AsMuchAsElements = r.Count
	if !r.To.IsZero() {
		req.TimeRange.ClosestTimestamp = r.To.UTC().Format(time.RFC3339)
	}
	sock, err := s.dialMD(ctx)
	if err != nil {
		return nil, err
	}
	defer sock.close()
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	rep, err := sock.requestJSON(cctx, "md/getchart", req)
	if err == nil {
		err = subscribeError(s.l.b, k.Name, rep)
	}
	var ans chartAnswer
	if err == nil && (json.Unmarshal(rep.data, &ans) != nil || ans.HistoricalID <= 0) {
		err = errMalformed
	}
	if err != nil {
		return nil, mapError(opRead, err)
	}
	byStart := map[time.Time]provider.Bar{}
	for done := false; !done; {
		select {
		case <-cctx.Done():
			return nil, provider.NewUnavailable(0, 0, cctx.Err())
		case ev, ok := <-sock.events:
			if !ok {
				return nil, provider.NewUnavailable(0, 0, errSocketClosed)
			}
			if ev.name != "chart" {
				continue
			}
			var d chartData
			if json.Unmarshal(ev.data, &d) != nil {
				return nil, provider.NewUnavailable(http.StatusOK, 0, errMalformed)
			}
			for _, c := range d.Charts {
				if c.ID != ans.HistoricalID {
					continue
				}
				done = done || c.EOH
				for _, b := range c.Bars {
					if !b.Open.ok || !b.High.ok || !b.Low.ok || !b.Close.ok {
						return nil, provider.NewUnavailable(http.StatusOK, 0, errMalformed)
					}
					byStart[b.Timestamp.UTC()] = provider.Bar{Start: b.Timestamp.UTC(), Open: b.Open.dec(), High: b.High.dec(),
						Low: b.Low.dec(), Close: b.Close.dec(), Volume: b.UpVolume.dec().Add(b.DownVolume.dec())}
				}
				if len(byStart) > maxBars {
					return nil, provider.NewUnavailable(http.StatusOK, 0, errMalformed)
				}
			}
		}
	}
	if ans.RealtimeID > 0 {
		_, _ = sock.requestJSON(cctx, "md/cancelchart", map[string]eid{"subscriptionId": ans.RealtimeID})
	}
	out := make([]provider.Bar, 0, len(byStart))
	for _, b := range byStart {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	if len(out) > r.Count {
		out = out[len(out)-r.Count:]
	}
	return out, nil
}
