package binance

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/coder/websocket"

	"github.com/svc/engine/sim/internal/dec"
	"github.com/svc/engine/sim/internal/simkit"
)

// listenKey is one user data stream key: valid until expires unless kept alive.
type listenKey struct {
	key     string
	acct    *account
	expires time.Time
}

func (s *Sim) newListenKey(c *call) (any, error) {
	a := c.acct
	// The exchange answers an account that has an active key with that key, extended.
	if lk, ok := s.keys[a.listenKey]; ok {
		lk.expires = c.now.Add(s.opts.ListenKeyTTL)
		return map[string]any{"listenKey": lk.key}, nil
	}
	k := randomHex(32)
	s.keys[k] = &listenKey{key: k, acct: a, expires: c.now.Add(s.opts.ListenKeyTTL)}
	a.listenKey = k
	return map[string]any{"listenKey": k}, nil
}

func (s *Sim) keepListenKey(c *call) (any, error) {
	lk, ok := s.keys[c.acct.listenKey]
	if !ok || (c.params.Get("listenKey") != "" && c.params.Get("listenKey") != lk.key) {
		return nil, errListenKey
	}
	lk.expires = c.now.Add(s.opts.ListenKeyTTL)
	return map[string]any{"listenKey": lk.key}, nil
}

func (s *Sim) closeListenKey(c *call) (any, error) {
	if lk, ok := s.keys[c.acct.listenKey]; ok {
		s.revokeKey(lk)
	}
	return map[string]any{}, nil
}

func (s *Sim) revokeKey(lk *listenKey) {
	delete(s.keys, lk.key)
	if lk.acct.listenKey == lk.key {
		lk.acct.listenKey = ""
	}
	for c := range s.conns {
		if c.listenKey == lk.key {
			c.Close()
		}
	}
}

// expireKeys sends listenKeyExpired on the streams of every key past its time and ends them.
func (s *Sim) expireKeys(now time.Time) {
	for _, lk := range s.keys {
		if lk.expires.After(now) {
			continue
		}
		msg, _ := json.Marshal(map[string]any{"e": "listenKeyExpired", "E": now.UnixMilli(), "listenKey": lk.key})
		for c := range s.conns {
			if c.listenKey == lk.key {
				c.Send(msg)
			}
		}
		s.revokeKey(lk)
	}
}

// emit sends one user data event to an account's streams, through the duplicate and reorder
// faults, with s.mu held.
func (s *Sim) emit(a *account, ev map[string]any) {
	msg, err := json.Marshal(ev)
	if err != nil {
		return
	}
	a.reorder.Pass(s.stream, &s.mu, msg, func(m []byte) { s.deliver(a, m) })
}

// deliver sends one user event to the account's streams (twice under the duplicate fault), with
// s.mu held.
func (s *Sim) deliver(a *account, msg []byte) {
	if a.listenKey == "" {
		return
	}
	for c := range s.conns {
		if c.listenKey == a.listenKey {
			for range s.stream.Copies() {
				c.Send(msg)
			}
		}
	}
}

// emitOrder sends ORDER_TRADE_UPDATE for an order's execution x (NEW, TRADE, CANCELED, EXPIRED,
// AMENDMENT); f is the trade of a TRADE.
func (s *Sim) emitOrder(a *account, o *order, x string, f *fill, now time.Time) {
	m := s.markets[o.symbol]
	ms := now.UnixMilli()
	body := map[string]any{
		"s": o.symbol, "c": o.cid, "S": o.side, "o": o.typ, "f": o.tif, "q": m.qty(o.qty), "p": m.px(o.price),
		"ap": m.px(o.avg()), "sp": m.px(dec.Zero()), "x": x, "X": o.status, "i": o.id, "l": "0", "z": m.qty(o.executed),
		"L": "0", "T": ms, "t": 0, "b": "0", "a": "0", "m": false, "R": o.reduceOnly || o.closePos,
		"wt": o.workingType, "ot": o.origType, "ps": o.posSide, "cp": o.closePos, "rp": "0", "pP": o.priceProtect,
		"si": 0, "ss": 0, "V": "EXPIRE_MAKER", "pm": "NONE", "gtd": 0,
	}
	if f != nil {
		body["l"] = m.qty(f.qty)
		body["L"] = m.px(f.price)
		body["N"] = "USDT"
		body["n"] = dec.Fixed(f.fee, 8)
		body["t"] = f.id
		body["m"] = f.maker
		body["rp"] = dec.Fixed(f.realized, 8)
	}
	s.emit(a, map[string]any{"e": "ORDER_TRADE_UPDATE", "E": ms, "T": ms, "o": body})
}

// emitAccount sends ACCOUNT_UPDATE (reason ORDER) after a fill: the USDT balance and the
// symbol's positions.
func (s *Sim) emitAccount(a *account, symbol string, realized, fee *apd.Decimal, now time.Time) {
	m := s.markets[symbol]
	ms := now.UnixMilli()
	w := a.wallet["USDT"]
	var poss []map[string]any
	for _, side := range a.sides() {
		k := posKey{symbol, side}
		p := a.position(symbol, side)
		poss = append(poss, map[string]any{
			"s": symbol, "pa": m.qty(p.amt), "ep": dec.Fixed(p.entry, 8), "bep": dec.Fixed(p.entry, 8),
			"cr": dec.Fixed(p.realized, 8), "up": dec.Fixed(s.positionUPnL(k, p), 8), "mt": "cross", "iw": "0", "ps": side,
		})
	}
	s.emit(a, map[string]any{"e": "ACCOUNT_UPDATE", "E": ms, "T": ms, "a": map[string]any{
		"m": "ORDER",
		"B": []map[string]any{{"a": "USDT", "wb": dec.Fixed(w, 8), "cw": dec.Fixed(w, 8), "bc": dec.Fixed(dec.Sub(realized, fee), 8)}},
		"P": poss,
	}})
}

// wsConn is one WebSocket client. Messages queue on its outbox; a writer goroutine sends them and
// pings.
type wsConn struct {
	simkit.Outbox[[]byte]
	c         *websocket.Conn
	listenKey string          // user stream; "" for a market stream
	streams   map[string]bool // market stream names ("btcusdt@markprice")
	combined  bool
}

func (s *Sim) serveStream(w http.ResponseWriter, r *http.Request) {
	conn := &wsConn{Outbox: simkit.NewOutbox[[]byte](4096), streams: map[string]bool{}}
	s.mu.Lock()
	switch {
	case r.URL.Path == "/stream":
		conn.combined = true
		for _, name := range strings.Split(r.URL.Query().Get("streams"), "/") {
			if name != "" {
				conn.streams[strings.ToLower(name)] = true
			}
		}
	default:
		name := strings.TrimPrefix(r.URL.Path, "/ws/")
		if _, ok := s.keys[name]; ok {
			conn.listenKey = name
		} else if strings.Contains(name, "@") {
			conn.streams[strings.ToLower(name)] = true
		}
	}
	if conn.listenKey == "" && len(conn.streams) == 0 {
		s.mu.Unlock()
		conn.Shut(nil, true)
		http.Error(w, `{"code":-1125,"msg":"This listenKey does not exist."}`, http.StatusBadRequest)
		return
	}
	// Registered before the handshake answers, so that no event after the client's dial returns
	// is missed; until the writer runs, events wait in the queue.
	s.conns[conn] = struct{}{}
	s.mu.Unlock()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Shut(nil, true)
		return
	}
	conn.c = ws
	ctx := ws.CloseRead(conn.Ctx)
	s.writeLoop(ctx, conn)
	s.mu.Lock()
	delete(s.conns, conn)
	abrupt := conn.Abrupt()
	s.mu.Unlock()
	conn.Shut(ws, abrupt)
}

func (s *Sim) writeLoop(ctx context.Context, conn *wsConn) {
	ping := time.NewTicker(s.opts.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-conn.Out:
			if !ok {
				return
			}
			if simkit.Write(ctx, conn.c, msg) != nil {
				return
			}
		case <-ping.C:
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := conn.c.Ping(pctx)
			cancel()
			if err != nil {
				return
			}
		}
	}
}

// publishMarket sends a symbol's mark price, book ticker and 1m kline to the market streams that
// name them, with s.mu held.
func (s *Sim) publishMarket(m *market, now time.Time) {
	sym := strings.ToLower(m.spec.Name)
	ms := now.UnixMilli()
	px := m.px(m.price)
	events := map[string]map[string]any{
		sym + "@markprice": {"e": "markPriceUpdate", "E": ms, "s": m.spec.Name, "p": dec.Fixed(m.mark, 8),
			"i": dec.Fixed(m.mark, 8), "P": dec.Fixed(m.mark, 8), "r": "0.00010000", "T": nextFunding(now)},
		sym + "@bookticker": {"e": "bookTicker", "u": m.updateID, "E": ms, "T": ms, "s": m.spec.Name,
			"b": px, "B": "10.000", "a": px, "A": "10.000"},
	}
	last := m.candles[len(m.candles)-1]
	events[sym+"@kline_1m"] = map[string]any{"e": "kline", "E": ms, "s": m.spec.Name, "k": map[string]any{
		"t": last.start, "T": last.start + 59999, "s": m.spec.Name, "i": "1m", "f": 0, "L": 0,
		"o": m.px(last.open), "c": m.px(last.close), "h": m.px(last.high), "l": m.px(last.low),
		"v": m.qty(last.volume), "n": last.trades, "x": false, "q": dec.Fixed(last.quoteVolume, 8), "V": "0", "Q": "0", "B": "0",
	}}
	for name, ev := range events {
		var plainMsg, combinedMsg []byte
		for c := range s.conns {
			if !c.streams[name] && !c.streams[strings.Replace(name, "@markprice", "@markprice@1s", 1)] {
				continue
			}
			if c.combined {
				if combinedMsg == nil {
					combinedMsg, _ = json.Marshal(map[string]any{"stream": streamName(c, name), "data": ev})
				}
				c.Send(combinedMsg)
				continue
			}
			if plainMsg == nil {
				plainMsg, _ = json.Marshal(ev)
			}
			c.Send(plainMsg)
		}
	}
}

// streamName is the stream's name as the client spelled it (the exchange echoes it).
func streamName(c *wsConn, lower string) string {
	if c.streams[lower] {
		return lower
	}
	return strings.Replace(lower, "@markprice", "@markprice@1s", 1)
}
