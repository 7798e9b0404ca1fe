package tradovate

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
)

// Quotes implements provider.QuoteSession: the market-data socket of the
// login (authorized with its market-data token), md/subscribeQuote for
// each symbol, and each md event's quotes as the engine's: best bid and
// offer, and the last trade as the mark. A demo login carries no market
// data: *provider.NotEntitled (demo_login) without dialing. A subscription
// the API refuses is *provider.NotEntitled (no_subscription): the
// documentation does not give the refusal's shape, so any answer but 200,
// and a 200 whose data carries an errorText or a mode other than RealTime
// (a delayed feed is not the trader's subscription), is taken as one,
// except 404 (the symbol is unknown: *provider.Unsupported). The channel closes when
// ctx ends or the session closes; after a cut it dials and subscribes
// again, and the first quote of each symbol then has Stale set. A
// subscription refused on a later dial ends the stream.
func (s *session) Quotes(ctx context.Context, symbols []string) (<-chan provider.Quote, error) {
	if s.l.token().Environment != provider.EnvLive {
		return nil, &provider.NotEntitled{Reason: provider.EntitlementDemoLogin}
	}
	if len(symbols) == 0 {
		return nil, &provider.Unsupported{Field: "symbols", Value: ""}
	}
	names := map[eid]string{}
	for _, sym := range symbols {
		k, err := s.l.contractByName(ctx, sym)
		if errors.Is(err, provider.ErrNotFound) {
			return nil, &provider.Unsupported{Field: "symbols", Value: sym}
		}
		if err != nil {
			return nil, err
		}
		names[k.ID] = k.Name
	}
	sock, err := s.openMD(ctx, names)
	if err != nil {
		return nil, err
	}
	out := make(chan provider.Quote, eventBuffer)
	adapterkit.Go(&s.wg, ctx, s.closed, func(ctx context.Context) {
		defer close(out)
		last := map[eid]*provider.Quote{}
		stale := map[eid]bool{}
		for {
			if !s.readMD(ctx, sock, names, last, stale, out) {
				sock.close()
				return
			}
			sock.close()
			for cid := range names {
				stale[cid] = true
			}
			if !adapterkit.Redial(ctx, s.closed, s.p.opts.Reconnect, func() (err error) {
				sock, err = s.openMD(ctx, names)
				return err
			}, func(err error) bool {
				return errors.Is(err, provider.ErrNotEntitled) || errors.Is(err, provider.ErrUnauthorized)
			}) {
				return
			}
		}
	})
	return out, nil
}

// openMD dials the market-data socket and subscribes to every contract.
func (s *session) openMD(ctx context.Context, names map[eid]string) (*socket, error) {
	sock, err := s.dialMD(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	for _, name := range names {
		r, err := sock.requestJSON(cctx, "md/subscribeQuote", map[string]string{"symbol": name})
		if err == nil {
			err = subscribeError(s.l.b, name, r)
		}
		if err != nil {
			sock.close()
			return nil, mapError(opRead, err)
		}
	}
	return sock, nil
}

// dialMD dials the market-data socket with the login's market-data token
// (its access token when it has none); a token not taken is renewed once.
func (s *session) dialMD(ctx context.Context) (*socket, error) {
	mdToken := func(t provider.Token) string {
		if t.MarketData != "" {
			return t.MarketData
		}
		return t.Access
	}
	tok := s.l.token()
	sock, err := s.p.openSocket(ctx, s.l.b, s.p.opts.MDURL, mdToken(tok))
	if errors.Is(err, errExpired) {
		if rerr := s.l.renew(ctx, tok.Access); rerr != nil {
			return nil, rerr
		}
		sock, err = s.p.openSocket(ctx, s.l.b, s.p.opts.MDURL, mdToken(s.l.token()))
	}
	if err != nil {
		return nil, mapError(opRead, err)
	}
	return sock, nil
}

// subscribeError reads md/subscribeQuote's answer (see Quotes).
func subscribeError(b *budget, symbol string, r reply) error {
	switch r.status {
	case http.StatusOK:
		if pen, ok := penaltyOf(r.data); ok {
			return b.penalize("ws:md/subscribeQuote", pen)
		}
		var e struct {
			ErrorText string `json:"errorText"`
			Mode      string `json:"mode"`
		}
		if t := strings.TrimSpace(string(r.data)); strings.HasPrefix(t, "{") && json.Unmarshal(r.data, &e) == nil &&
			(e.ErrorText != "" || e.Mode != "" && e.Mode != "RealTime") {
			return &provider.NotEntitled{Reason: provider.EntitlementNoSubscription}
		}
		return nil
	case http.StatusNotFound:
		return &provider.Unsupported{Field: "symbols", Value: symbol}
	case http.StatusTooManyRequests, http.StatusLocked:
		return b.observe(r.status, nil)
	}
	return &provider.NotEntitled{Reason: provider.EntitlementNoSubscription}
}

// mdData is an md event's data.
type mdData struct {
	Quotes []mdQuote `json:"quotes"`
}

// mdQuote is one quote of an md event; entries holds Bid, Offer, Trade and
// more, each {price, size}.
type mdQuote struct {
	Timestamp  time.Time `json:"timestamp"`
	ContractID eid       `json:"contractId"`
	Entries    map[string]struct {
		Price num `json:"price"`
		Size  num `json:"size"`
	} `json:"entries"`
}

// readMD delivers the socket's quotes until it ends (true) or ctx ends
// (false).
func (s *session) readMD(ctx context.Context, sock *socket, names map[eid]string, last map[eid]*provider.Quote,
	stale map[eid]bool, out chan<- provider.Quote) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-sock.events:
			if !ok {
				return true
			}
			if ev.name != "md" {
				continue
			}
			for _, q := range quotesOf(ev.data, names, last) {
				cid := eid(0)
				for k, n := range names {
					if n == q.Symbol {
						cid = k
					}
				}
				q.Stale = stale[cid]
				delete(stale, cid)
				if !adapterkit.Send(ctx, out, q) {
					return false
				}
			}
		}
	}
}

// quotesOf folds an md event into each contract's latest quote and returns
// the quotes that changed. Contracts not asked for are left out.
func quotesOf(data json.RawMessage, names map[eid]string, last map[eid]*provider.Quote) []provider.Quote {
	var d mdData
	if json.Unmarshal(data, &d) != nil {
		return nil
	}
	var out []provider.Quote
	for _, m := range d.Quotes {
		name, ok := names[m.ContractID]
		if !ok {
			continue
		}
		q := last[m.ContractID]
		if q == nil {
			q = &provider.Quote{Symbol: name}
			last[m.ContractID] = q
		}
		changed := false
		for k, e := range m.Entries {
			if !e.Price.ok {
				continue
			}
			switch k {
			case "Bid":
				q.Bid, changed = e.Price.ptr(), true
			case "Offer":
				q.Ask, changed = e.Price.ptr(), true
			case "Trade":
				q.Mark, changed = e.Price.ptr(), true
			}
		}
		if !changed {
			continue
		}
		q.At = m.Timestamp.UTC()
		out = append(out, *q)
	}
	return out
}
