package binance

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/adshao/go-binance/v2/common"
	"github.com/adshao/go-binance/v2/futures"

	"github.com/svc/engine/engine/provider"
)

// session is one linked account. Safe for concurrent use.
type session struct {
	p      *Provider
	key    string
	secret []byte
	c      *futures.Client
	b      *budget
	pm     atomic.Bool // the key reported portfolio margin: /fapi refuses it
	algos  *algoBook   // the account's conditional orders (algo.go)

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup
}

var _ provider.Session = (*session)(nil)

// permissions is the spot API's apiRestrictions answer, the fields read.
type permissions struct {
	EnableReading                bool `json:"enableReading"`
	EnableWithdrawals            bool `json:"enableWithdrawals"`
	EnableFutures                bool `json:"enableFutures"`
	EnablePortfolioMarginTrading bool `json:"enablePortfolioMarginTrading"`
}

// Connect implements provider.Provider. It reads the key's permissions
// (refusing a key that can withdraw, *provider.KeyRefused) and the futures
// account's configuration (canTrade). A portfolio-margin account connects;
// its Settings say so and its trading calls answer
// *provider.ModeUnsupported without sending.
func (p *Provider) Connect(ctx context.Context, c provider.Credentials) (provider.Session, error) {
	if !c.Valid() {
		return nil, &provider.Unauthorized{}
	}
	b := p.budget(c)
	s := &session{p: p, key: c.APIKey, secret: append([]byte(nil), c.Secret...), b: b, algos: newAlgoBook(),
		closed: make(chan struct{})}
	s.c = p.client(c.APIKey, string(c.Secret), b)
	if p.opts.SpotURL != "" {
		perm, err := s.permissions(ctx)
		if err != nil {
			return nil, err
		}
		switch {
		case perm.EnableWithdrawals:
			return nil, &provider.KeyRefused{Reason: provider.KeyCanWithdraw}
		case !perm.EnableReading:
			return nil, &provider.KeyRefused{Reason: provider.KeyUnreadable}
		case perm.EnablePortfolioMarginTrading:
			s.pm.Store(true)
			return s, nil
		case !perm.EnableFutures:
			return nil, &provider.KeyRefused{Reason: provider.KeyNoFutures}
		}
	}
	cctx, cancel := p.call(ctx)
	defer cancel()
	cfg, err := s.c.NewGetAccountConfigService().Do(cctx)
	if err != nil {
		return nil, mapError(opRead, err)
	}
	if !cfg.CanTrade {
		return nil, &provider.KeyRefused{Reason: provider.KeyCannotTrade}
	}
	return s, nil
}

// permissions reads GET /sapi/v1/account/apiRestrictions: the library has
// the call only in its spot client, whose answer lacks
// enablePortfolioMarginTrading.
func (s *session) permissions(ctx context.Context) (permissions, error) {
	var perm permissions
	err := s.signedGet(ctx, s.p.opts.SpotURL, "/sapi/v1/account/apiRestrictions", url.Values{}, &perm)
	return perm, err
}

// signedGet is the adapter's own signed read (HMAC-SHA256 of the query,
// X-MBX-APIKEY), through the credential's budget, for what the library
// lacks. It decodes a 2xx answer into out and maps the rest.
func (s *session) signedGet(ctx context.Context, base, path string, q url.Values, out any) error {
	ctx, cancel := s.p.call(ctx)
	defer cancel()
	q.Set("recvWindow", "5000")
	q.Set("timestamp", strconv.FormatInt(s.p.opts.Now().UnixMilli(), 10))
	raw := q.Encode()
	mac := hmac.New(sha256.New, s.secret)
	mac.Write([]byte(raw))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path+"?"+raw+"&signature="+hex.EncodeToString(mac.Sum(nil)), nil)
	if err != nil {
		return provider.NewUnavailable(0, 0, err)
	}
	req.Header.Set("X-MBX-APIKEY", s.key)
	resp, err := s.c.HTTPClient.Do(req)
	if err != nil {
		return mapError(opRead, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return provider.NewUnavailable(resp.StatusCode, 0, err)
	}
	if resp.StatusCode >= 400 {
		var apiErr common.APIError
		_ = json.Unmarshal(body, &apiErr)
		return mapError(opRead, &apiErr)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return provider.NewUnavailable(resp.StatusCode, 0, errMalformed)
	}
	return nil
}

// Settings implements provider.Session: hedge and multi-assets mode from
// the futures account's configuration, portfolio margin from the key.
func (s *session) Settings(ctx context.Context) (provider.Settings, error) {
	if s.p.opts.SpotURL != "" {
		perm, err := s.permissions(ctx)
		if err != nil {
			return provider.Settings{}, err
		}
		s.pm.Store(perm.EnablePortfolioMarginTrading)
	}
	if s.pm.Load() {
		return provider.Settings{PortfolioMargin: true}, nil
	}
	return s.config(ctx)
}

func (s *session) config(ctx context.Context) (provider.Settings, error) {
	ctx, cancel := s.p.call(ctx)
	defer cancel()
	cfg, err := s.c.NewGetAccountConfigService().Do(ctx)
	if err != nil {
		return provider.Settings{}, mapError(opRead, err)
	}
	return provider.Settings{HedgeMode: cfg.DualSidePosition, MultiAssets: cfg.MultiAssetsMargin}, nil
}

// portfolio refuses a call the exchange's futures API would refuse for a
// portfolio-margin account, sending nothing.
func (s *session) portfolio() error {
	if s.pm.Load() {
		return &provider.ModeUnsupported{Setting: provider.SettingPortfolioMargin, Reported: provider.ReportedPortfolioMargin, Supported: "standard"}
	}
	return nil
}

// Snapshot implements provider.Session: settings, balances, positions and
// every working order, each read whole; any failure fails the snapshot. The
// working orders are the open orders of the order route and the
// untriggered conditional orders of the algo service; an open order a
// triggered conditional order placed (a stop-limit's limit order) is that
// conditional order. Open orders under ids the engine did not derive and
// no link yet have the symbol's algo orders read, to learn which of them
// conditional orders placed.
func (s *session) Snapshot(ctx context.Context) (provider.Snapshot, error) {
	if err := s.portfolio(); err != nil {
		return provider.Snapshot{}, err
	}
	snap := provider.Snapshot{At: s.p.opts.Now().UTC()}
	var err error
	if snap.Settings, err = s.config(ctx); err != nil {
		return provider.Snapshot{}, err
	}
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	bals, err := s.c.NewGetBalanceService().Do(cctx)
	if err != nil {
		return provider.Snapshot{}, mapError(opRead, err)
	}
	for _, b := range bals {
		x := provider.Balance{Asset: b.Asset}
		if b.UpdateTime > 0 { // the balance's last change: a later trade is not in it
			x.AsOf = millis(b.UpdateTime)
		}
		if x.Wallet, err = dec("balance", b.Balance); err == nil {
			if x.Available, err = dec("availableBalance", b.AvailableBalance); err == nil {
				x.Unrealized, err = dec("crossUnPnl", b.CrossUnPnl)
			}
		}
		if err != nil {
			return provider.Snapshot{}, provider.NewUnavailable(0, 0, err)
		}
		snap.Balances = append(snap.Balances, x)
	}
	risks, err := s.c.NewGetPositionRiskService().Do(cctx)
	if err != nil {
		return provider.Snapshot{}, mapError(opRead, err)
	}
	for _, r := range risks {
		x := provider.Position{Instrument: r.Symbol}
		if x.Quantity, err = dec("positionAmt", r.PositionAmt); err != nil {
			return provider.Snapshot{}, provider.NewUnavailable(0, 0, err)
		}
		if x.Quantity.IsZero() {
			continue
		}
		if x.EntryPrice, err = dec("entryPrice", r.EntryPrice); err == nil {
			if x.MarkPrice, err = dec("markPrice", r.MarkPrice); err == nil {
				x.Unrealized, err = dec("unRealizedProfit", r.UnRealizedProfit)
			}
		}
		if err != nil {
			return provider.Snapshot{}, provider.NewUnavailable(0, 0, err)
		}
		snap.Positions = append(snap.Positions, x)
	}
	orders, err := s.c.NewListOpenOrdersService().Do(cctx)
	if err != nil {
		return provider.Snapshot{}, mapError(opRead, err)
	}
	open := make([]provider.OrderState, 0, len(orders))
	learn := map[string]bool{}
	for _, o := range orders {
		st, err := fromOrder(o)
		if err != nil {
			return provider.Snapshot{}, provider.NewUnavailable(0, 0, err)
		}
		if _, linked := s.algos.placedBy(o.OrderID); !linked && !provider.Derived(st.ClientOrderID) && !s.algos.isRegular(o.OrderID) {
			learn[o.Symbol] = true
		}
		open = append(open, st)
	}
	conditional, err := s.openAlgos(ctx)
	if err != nil {
		return provider.Snapshot{}, err
	}
	for symbol := range learn {
		if err := s.learnAlgos(ctx, symbol); err != nil {
			return provider.Snapshot{}, err
		}
	}
	seen := map[string]bool{}
	for _, st := range conditional {
		seen[st.ClientOrderID] = true
		snap.Orders = append(snap.Orders, st)
	}
	for _, st := range open {
		id := providerOrderID(st)
		if algo, ok := s.algos.observeActual(id, st); ok {
			if !seen[algo.ClientOrderID] {
				seen[algo.ClientOrderID] = true
				snap.Orders = append(snap.Orders, algo)
			}
			continue
		}
		s.algos.markRegular(id)
		snap.Orders = append(snap.Orders, st)
	}
	return snap, nil
}

// Place implements provider.Session. A market or limit order goes to the
// order route, asking for the full answer (RESULT), so a market order
// answers filled; a conditional order (stop, stop_limit, take_profit) goes
// to the algo service (algoservice.go) under clientAlgoId o.ClientOrderID.
func (s *session) Place(ctx context.Context, o provider.Order) (provider.OrderState, error) {
	if err := s.portfolio(); err != nil {
		return provider.OrderState{}, err
	}
	r, err := toRequest(o)
	if err != nil {
		return provider.OrderState{}, err
	}
	if r.algo != "" {
		return s.placeAlgo(ctx, r, o)
	}
	svc := s.c.NewCreateOrderService().Symbol(r.symbol).Side(r.side).Type(r.typ).
		NewClientOrderID(r.clientOrderID).NewOrderResponseType(futures.NewOrderRespTypeRESULT)
	if r.tif != "" {
		svc.TimeInForce(r.tif)
	}
	if r.quantity != "" {
		svc.Quantity(r.quantity)
	}
	if r.price != "" {
		svc.Price(r.price)
	}
	if r.stopPrice != "" {
		svc.StopPrice(r.stopPrice)
	}
	if r.reduceOnly {
		svc.ReduceOnly(true)
	}
	if r.closePosition {
		svc.ClosePosition(true)
	}
	if r.workingType != "" {
		svc.WorkingType(r.workingType)
	}
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	res, err := svc.Do(cctx)
	if err != nil {
		return provider.OrderState{}, mapError(opPlace, err)
	}
	st, err := fromCreate(res)
	if err != nil {
		return provider.OrderState{}, provider.NewUnknown(string(opPlace), http.StatusOK, 0, err)
	}
	s.algos.markRegular(res.OrderID)
	return st, nil
}

// Cancel implements provider.Session; it returns once the exchange
// accepted the cancel. A conditional order is canceled at the algo service
// (or, triggered, the order it placed while that rests); an id the session
// has not met as one is tried on the order route first.
func (s *session) Cancel(ctx context.Context, instrument, clientOrderID string) (provider.OrderState, error) {
	if err := s.portfolio(); err != nil {
		return provider.OrderState{}, err
	}
	if s.algos.known(clientOrderID) {
		return s.cancelAlgo(ctx, instrument, clientOrderID)
	}
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	res, err := s.c.NewCancelOrderService().Symbol(instrument).OrigClientOrderID(clientOrderID).Do(cctx)
	if err != nil {
		if err := mapError(opCancel, err); !errors.Is(err, provider.ErrNotFound) {
			return provider.OrderState{}, err
		}
		return s.cancelAlgo(ctx, instrument, clientOrderID)
	}
	st, err := fromCancel(res)
	if err != nil {
		return provider.OrderState{}, provider.NewUnknown(string(opCancel), http.StatusOK, 0, err)
	}
	return st, nil
}

// Replace implements provider.Session with the exchange's order modify
// (limit orders: price and quantity). Of a conditional order only the
// limit order a triggered stop-limit placed can be changed so.
func (s *session) Replace(ctx context.Context, r provider.Replace) (provider.OrderState, error) {
	if err := s.portfolio(); err != nil {
		return provider.OrderState{}, err
	}
	side := futures.SideTypeBuy
	switch r.Side {
	case provider.Buy:
	case provider.Sell:
		side = futures.SideTypeSell
	default:
		return provider.OrderState{}, &provider.Unsupported{Field: "side", Value: string(r.Side)}
	}
	if r.Quantity.Sign() <= 0 || r.LimitPrice.Sign() <= 0 {
		return provider.OrderState{}, &provider.Unsupported{Field: "quantity", Value: r.Quantity.String()}
	}
	if s.algos.known(r.ClientOrderID) {
		return s.replaceAlgo(ctx, r, side)
	}
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	res, err := s.c.NewModifyOrderService().Symbol(r.Instrument).OrigClientOrderID(r.ClientOrderID).Side(side).
		Quantity(r.Quantity.String()).Price(r.LimitPrice.String()).Do(cctx)
	if err != nil {
		if err := mapError(opReplace, err); !errors.Is(err, provider.ErrNotFound) {
			return provider.OrderState{}, err
		}
		return s.replaceAlgo(ctx, r, side)
	}
	st, err := fromModify(res)
	if err != nil {
		return provider.OrderState{}, provider.NewUnknown(string(opReplace), http.StatusOK, 0, err)
	}
	return st, nil
}

// Lookup implements provider.Session: GET /fapi/v1/order by the client
// order id, or for a conditional order GET /fapi/v1/algoOrder by its
// clientAlgoId (and, once it triggered, the order it placed). An id the
// session has not met as a conditional order's is read on the order route
// first, then at the algo service. It never sends an order.
func (s *session) Lookup(ctx context.Context, instrument, clientOrderID string) (provider.OrderState, error) {
	if err := s.portfolio(); err != nil {
		return provider.OrderState{}, err
	}
	if s.algos.known(clientOrderID) {
		st, _, err := s.lookupAlgo(ctx, clientOrderID)
		return st, err
	}
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	res, err := s.c.NewGetOrderService().Symbol(instrument).OrigClientOrderID(clientOrderID).Do(cctx)
	if err != nil {
		if err := mapError(opRead, err); !errors.Is(err, provider.ErrNotFound) {
			return provider.OrderState{}, err
		}
		st, _, err := s.lookupAlgo(ctx, clientOrderID)
		return st, err
	}
	st, err := fromOrder(res)
	if err != nil {
		return provider.OrderState{}, provider.NewUnavailable(http.StatusOK, 0, err)
	}
	if algo, ok := s.placedOrder(ctx, res.OrderID, st); ok {
		return algo, nil
	}
	return st, nil
}

// Executions implements provider.Session with GET /fapi/v1/userTrades;
// the cursor is the next trade id to read (fromId). The adapter signs this
// read itself: go-binance's ListAccountTradeService (v2.8.9) sends the
// parameter as "fromID", which the exchange does not read. A trade of an
// order a conditional order placed is that conditional order's (its
// ClientOrderID and ProviderOrderID); trades of orders the session cannot
// place have the symbol's algo orders read once to learn which placed
// them.
func (s *session) Executions(ctx context.Context, instrument string, since provider.Cursor, limit int) ([]provider.Execution, provider.Cursor, error) {
	if err := s.portfolio(); err != nil {
		return nil, since, err
	}
	q := url.Values{}
	q.Set("symbol", instrument)
	if since != "" {
		from, err := strconv.ParseInt(string(since), 10, 64)
		if err != nil || from < 0 {
			return nil, since, &provider.Unsupported{Field: "cursor", Value: string(since)}
		}
		q.Set("fromId", strconv.FormatInt(from, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(min(limit, 1000)))
	}
	var trades []*futures.AccountTrade
	if err := s.signedGet(ctx, s.p.opts.RestURL, "/fapi/v1/userTrades", q, &trades); err != nil {
		return nil, since, err
	}
	var unplaced []int64
	for _, t := range trades {
		if _, linked := s.algos.placedBy(t.OrderID); !linked && !s.algos.isRegular(t.OrderID) {
			unplaced = append(unplaced, t.OrderID)
		}
	}
	if len(unplaced) > 0 {
		if err := s.learnAlgos(ctx, instrument); err != nil {
			return nil, since, err
		}
		s.algos.markRegular(unplaced...)
	}
	out := make([]provider.Execution, 0, len(trades))
	next := since
	for _, t := range trades {
		e, err := fromTrade(t)
		if err != nil {
			return nil, since, provider.NewUnavailable(http.StatusOK, 0, err)
		}
		if cid, id, ok := s.algos.ids(t.OrderID); ok {
			e.ClientOrderID, e.ProviderOrderID = cid, id
		}
		out = append(out, e)
		next = provider.Cursor(strconv.FormatInt(t.ID+1, 10))
	}
	return out, next, nil
}

// Close implements provider.Session: it ends the streams and waits for them.
func (s *session) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	s.wg.Wait()
	return nil
}
