package binance

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/sim/internal/dec"
	"github.com/svc/engine/sim/internal/simkit"
)

// Account is a trader's exchange account as a test creates it: one API key with its secret and
// permissions, and the wallet balances of its futures account.
type Account struct {
	APIKey      string `json:"apiKey"`
	Secret      string `json:"secret"`
	NoFutures   bool   `json:"noFutures,omitempty"`   // the key lacks futures permission: every /fapi signed call answers -2015
	CanWithdraw bool   `json:"canWithdraw,omitempty"` // the key may withdraw (apiRestrictions enableWithdrawals)
	// PortfolioMargin is an account switched to portfolio margin: its key reads enableFutures false
	// and enablePortfolioMarginTrading true in apiRestrictions, and the UM-futures API (/fapi) refuses
	// it with -2015, as the exchange documents ("the Futures API cannot be used ... if you have
	// enabled portfolio margin"); such an account trades through /papi, which is not simulated.
	PortfolioMargin bool              `json:"portfolioMargin,omitempty"`
	Balances        map[string]string `json:"balances,omitempty"` // asset → wallet balance; {"USDT": "10000"} when empty
	HedgeMode       bool              `json:"hedgeMode,omitempty"`
	MultiAssets     bool              `json:"multiAssets,omitempty"`
}

func (a Account) validate() error {
	var errs []error
	if a.APIKey == "" || len(a.APIKey) > 128 {
		errs = append(errs, errors.New("account: apiKey must have 1 to 128 characters"))
	}
	if a.Secret == "" {
		errs = append(errs, errors.New("account: secret is required"))
	}
	for asset, v := range a.Balances {
		if d, ok := dec.Parse(v); !ok || d.Negative {
			errs = append(errs, fmt.Errorf("account: balance of %s is not a non-negative decimal", asset))
		}
	}
	return errors.Join(errs...)
}

type posKey struct{ symbol, side string }

type position struct {
	amt, entry, realized *apd.Decimal
	update               int64
}

// account is the simulator's state of one Account.
type account struct {
	key, secret                  string
	futures, withdraw, portfolio bool
	wallet                       map[string]*apd.Decimal
	dual, multi                  bool
	leverage                     map[string]int
	pos                          map[posKey]*position
	orders                       []*order     // every order, in placement order
	algos                        []*algoOrder // every conditional order, in placement order
	placed                       int64        // orders and algo orders placed: their seq
	trades                       []*fill
	listenKey                    string
	reorder                      simkit.Reorder[[]byte] // a user event held back by the reorder fault
	update                       int64
}

// AddAccount creates an account, or replaces the one with the same API key.
func (s *Sim) AddAccount(a Account) error {
	if err := a.validate(); err != nil {
		return err
	}
	bal := a.Balances
	if len(bal) == 0 {
		bal = map[string]string{"USDT": "10000"}
	}
	acct := &account{key: a.APIKey, secret: a.Secret, futures: !a.NoFutures, withdraw: a.CanWithdraw,
		portfolio: a.PortfolioMargin, wallet: map[string]*apd.Decimal{}, dual: a.HedgeMode, multi: a.MultiAssets,
		leverage: map[string]int{}, pos: map[posKey]*position{}, update: time.Now().UnixMilli()}
	for asset, v := range bal {
		acct.wallet[asset], _ = dec.Parse(v)
	}
	if _, ok := acct.wallet["USDT"]; !ok {
		acct.wallet["USDT"] = dec.Zero()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.order {
		acct.leverage[m] = s.opts.Leverage
	}
	s.accounts[a.APIKey] = acct
	return nil
}

func (s *Sim) accountOf(apiKey string) (*account, error) {
	a, ok := s.accounts[apiKey]
	if !ok {
		return nil, fmt.Errorf("binance sim: no account with that API key")
	}
	return a, nil
}

func (a *account) position(symbol, side string) *position {
	k := posKey{symbol, side}
	p, ok := a.pos[k]
	if !ok {
		p = &position{amt: dec.Zero(), entry: dec.Zero(), realized: dec.Zero()}
		a.pos[k] = p
	}
	return p
}

func (a *account) sides() []string {
	if a.dual {
		return []string{"LONG", "SHORT"}
	}
	return []string{"BOTH"}
}

func (a *account) openOrders(symbol string) []*order {
	var out []*order
	for _, o := range a.orders {
		if o.open() && (symbol == "" || o.symbol == symbol) {
			out = append(out, o)
		}
	}
	return out
}

// margin is an account's margin arithmetic at mark prices, in USDT.
type margin struct {
	wallet, upnl, posIM, orderIM, maint *apd.Decimal
}

func (s *Sim) margin(a *account) margin {
	m := margin{wallet: a.usdtWallet(), upnl: dec.Zero(), posIM: dec.Zero(), orderIM: dec.Zero(), maint: dec.Zero()}
	for k, p := range a.pos {
		if p.amt.IsZero() {
			continue
		}
		mk := s.markets[k.symbol]
		m.upnl = dec.Add(m.upnl, dec.Mul(p.amt, dec.Sub(mk.mark, p.entry)))
		notional := dec.Abs(dec.Mul(p.amt, mk.mark))
		m.posIM = dec.Add(m.posIM, dec.Quo(notional, dec.Int(int64(a.leverage[k.symbol]))))
		m.maint = dec.Add(m.maint, dec.Mul(notional, dec.Must("0.004")))
	}
	for _, o := range a.openOrders("") {
		m.orderIM = dec.Add(m.orderIM, s.orderMargin(a, o))
	}
	return m
}

// usdtWallet is the wallet that margins positions: USDT alone, or in multi-assets mode USDT with
// USDC and FDUSD at par (other assets are not valued).
func (a *account) usdtWallet() *apd.Decimal {
	w := a.wallet["USDT"]
	if a.multi {
		for _, asset := range []string{"USDC", "FDUSD"} {
			if v, ok := a.wallet[asset]; ok {
				w = dec.Add(w, v)
			}
		}
	}
	return w
}

func (m margin) available() *apd.Decimal {
	v := dec.Sub(dec.Sub(dec.Add(m.wallet, m.upnl), m.posIM), m.orderIM)
	if v.Negative {
		return dec.Zero()
	}
	return v
}

func (s *Sim) positionUPnL(k posKey, p *position) *apd.Decimal {
	return dec.Mul(p.amt, dec.Sub(s.markets[k.symbol].mark, p.entry))
}

func (s *Sim) sortedPositions(a *account, symbol string, all bool) []posKey {
	var keys []posKey
	for _, name := range s.order {
		if symbol != "" && name != symbol {
			continue
		}
		for _, side := range a.sides() {
			k := posKey{name, side}
			p, ok := a.pos[k]
			if !all && (!ok || p.amt.IsZero()) {
				continue
			}
			keys = append(keys, k)
		}
	}
	return keys
}

func (s *Sim) assetRows(a *account, v3 bool) []map[string]any {
	m := s.margin(a)
	assets := make([]string, 0, len(a.wallet))
	for asset := range a.wallet {
		assets = append(assets, asset)
	}
	sort.Strings(assets)
	rows := make([]map[string]any, 0, len(assets))
	for _, asset := range assets {
		w := a.wallet[asset]
		upnl, im, posIM, ordIM, mm, avail := dec.Zero(), dec.Zero(), dec.Zero(), dec.Zero(), dec.Zero(), w
		if asset == "USDT" {
			upnl, posIM, ordIM, mm = m.upnl, m.posIM, m.orderIM, m.maint
			im = dec.Add(posIM, ordIM)
			avail = m.available()
		}
		row := map[string]any{
			"asset": asset, "walletBalance": dec.Fixed(w, 8), "unrealizedProfit": dec.Fixed(upnl, 8),
			"marginBalance": dec.Fixed(dec.Add(w, upnl), 8), "maintMargin": dec.Fixed(mm, 8), "initialMargin": dec.Fixed(im, 8),
			"positionInitialMargin": dec.Fixed(posIM, 8), "openOrderInitialMargin": dec.Fixed(ordIM, 8),
			"crossWalletBalance": dec.Fixed(w, 8), "crossUnPnl": dec.Fixed(upnl, 8), "availableBalance": dec.Fixed(avail, 8),
			"maxWithdrawAmount": dec.Fixed(avail, 8), "marginAvailable": true, "updateTime": a.update,
		}
		rows = append(rows, row)
	}
	return rows
}

func (s *Sim) accountTotals(a *account) map[string]any {
	m := s.margin(a)
	return map[string]any{
		"totalInitialMargin": dec.Fixed(dec.Add(m.posIM, m.orderIM), 8), "totalMaintMargin": dec.Fixed(m.maint, 8),
		"totalWalletBalance": dec.Fixed(m.wallet, 8), "totalUnrealizedProfit": dec.Fixed(m.upnl, 8),
		"totalMarginBalance": dec.Fixed(dec.Add(m.wallet, m.upnl), 8), "totalPositionInitialMargin": dec.Fixed(m.posIM, 8),
		"totalOpenOrderInitialMargin": dec.Fixed(m.orderIM, 8), "totalCrossWalletBalance": dec.Fixed(m.wallet, 8),
		"totalCrossUnPnl": dec.Fixed(m.upnl, 8), "availableBalance": dec.Fixed(m.available(), 8),
		"maxWithdrawAmount": dec.Fixed(m.available(), 8),
	}
}

func (s *Sim) accountV2(c *call) (any, error) {
	a := c.acct
	out := s.accountTotals(a)
	out["feeTier"] = 0
	out["canTrade"] = true
	out["canDeposit"] = true
	out["canWithdraw"] = true
	out["updateTime"] = 0
	out["multiAssetsMargin"] = a.multi
	out["tradeGroupId"] = -1
	out["assets"] = s.assetRows(a, false)
	var poss []map[string]any
	for _, k := range s.sortedPositions(a, "", true) {
		p := a.position(k.symbol, k.side)
		mk := s.markets[k.symbol]
		notional := dec.Mul(p.amt, mk.mark)
		im := dec.Quo(dec.Abs(notional), dec.Int(int64(a.leverage[k.symbol])))
		poss = append(poss, map[string]any{
			"symbol": k.symbol, "initialMargin": dec.Fixed(im, 8), "maintMargin": dec.Fixed(dec.Mul(dec.Abs(notional), dec.Must("0.004")), 8),
			"unrealizedProfit": dec.Fixed(s.positionUPnL(k, p), 8), "positionInitialMargin": dec.Fixed(im, 8),
			"openOrderInitialMargin": "0", "leverage": strconv.Itoa(a.leverage[k.symbol]), "isolated": false,
			"entryPrice": dec.Fixed(p.entry, 8), "breakEvenPrice": dec.Fixed(p.entry, 8), "maxNotional": "1000000",
			"bidNotional": "0", "askNotional": "0", "positionSide": k.side, "positionAmt": mk.qty(p.amt),
			"notional": dec.Fixed(notional, 8), "isolatedWallet": "0", "updateTime": p.update,
		})
	}
	out["positions"] = poss
	return out, nil
}

func (s *Sim) accountV3(c *call) (any, error) {
	a := c.acct
	out := s.accountTotals(a)
	out["assets"] = s.assetRows(a, true)
	poss := []map[string]any{}
	for _, k := range s.sortedPositions(a, "", false) {
		p := a.pos[k]
		mk := s.markets[k.symbol]
		notional := dec.Mul(p.amt, mk.mark)
		im := dec.Quo(dec.Abs(notional), dec.Int(int64(a.leverage[k.symbol])))
		poss = append(poss, map[string]any{
			"symbol": k.symbol, "positionSide": k.side, "positionAmt": mk.qty(p.amt),
			"unrealizedProfit": dec.Fixed(s.positionUPnL(k, p), 8), "isolatedMargin": "0", "notional": dec.Fixed(notional, 8),
			"isolatedWallet": "0", "initialMargin": dec.Fixed(im, 8), "maintMargin": dec.Fixed(dec.Mul(dec.Abs(notional), dec.Must("0.004")), 8),
			"updateTime": p.update,
		})
	}
	out["positions"] = poss
	return out, nil
}

func (s *Sim) balances(c *call) (any, error) {
	rows := s.assetRows(c.acct, false)
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		out = append(out, map[string]any{
			"accountAlias": "SgsR", "asset": r["asset"], "balance": r["walletBalance"],
			"crossWalletBalance": r["crossWalletBalance"], "crossUnPnl": r["crossUnPnl"],
			"availableBalance": r["availableBalance"], "maxWithdrawAmount": r["maxWithdrawAmount"],
			"marginAvailable": true, "updateTime": c.acct.update,
		})
	}
	return out, nil
}

func (s *Sim) positionRow(a *account, k posKey) map[string]any {
	p := a.position(k.symbol, k.side)
	mk := s.markets[k.symbol]
	notional := dec.Mul(p.amt, mk.mark)
	return map[string]any{
		"symbol": k.symbol, "positionSide": k.side, "positionAmt": mk.qty(p.amt), "entryPrice": dec.Fixed(p.entry, 8),
		"breakEvenPrice": dec.Fixed(p.entry, 8), "markPrice": dec.Fixed(mk.mark, 8),
		"unRealizedProfit": dec.Fixed(s.positionUPnL(k, p), 8), "liquidationPrice": "0", "isolatedMargin": "0.00000000",
		"notional": dec.Fixed(notional, 8), "isolatedWallet": "0", "updateTime": p.update,
	}
}

func (s *Sim) positionRiskV2(c *call) (any, error) {
	ms, err := s.symbolParam(c, false)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, m := range ms {
		for _, k := range s.sortedPositions(c.acct, m.spec.Name, true) {
			row := s.positionRow(c.acct, k)
			row["leverage"] = strconv.Itoa(c.acct.leverage[k.symbol])
			row["marginType"] = "cross"
			row["isAutoAddMargin"] = "false"
			row["maxNotionalValue"] = "1000000"
			out = append(out, row)
		}
	}
	return out, nil
}

func (s *Sim) positionRiskV3(c *call) (any, error) {
	ms, err := s.symbolParam(c, false)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, m := range ms {
		for _, k := range s.sortedPositions(c.acct, m.spec.Name, false) {
			row := s.positionRow(c.acct, k)
			p := c.acct.pos[k]
			im := dec.Quo(dec.Abs(dec.Mul(p.amt, m.mark)), dec.Int(int64(c.acct.leverage[k.symbol])))
			row["marginAsset"] = "USDT"
			row["initialMargin"] = dec.Fixed(im, 8)
			row["maintMargin"] = dec.Fixed(dec.Mul(dec.Abs(dec.Mul(p.amt, m.mark)), dec.Must("0.004")), 8)
			row["positionInitialMargin"] = dec.Fixed(im, 8)
			row["openOrderInitialMargin"] = "0"
			row["adl"] = 0
			row["bidNotional"] = "0"
			row["askNotional"] = "0"
			out = append(out, row)
		}
	}
	return out, nil
}

func (s *Sim) accountConfig(c *call) (any, error) {
	return map[string]any{"feeTier": 0, "canTrade": true, "canDeposit": true, "canWithdraw": true,
		"dualSidePosition": c.acct.dual, "updateTime": 0, "multiAssetsMargin": c.acct.multi, "tradeGroupId": -1}, nil
}

func (s *Sim) getDual(c *call) (any, error) {
	return map[string]any{"dualSidePosition": c.acct.dual}, nil
}

func parseBool(p string, name string) (bool, error) {
	switch p {
	case "true", "TRUE", "True":
		return true, nil
	case "false", "FALSE", "False":
		return false, nil
	case "":
		return false, errMandatory(name)
	}
	return false, errInvalidValue(name)
}

var okAnswer = map[string]any{"code": 200, "msg": "success"}

func (s *Sim) postDual(c *call) (any, error) {
	on, err := parseBool(c.params.Get("dualSidePosition"), "dualSidePosition")
	if err != nil {
		return nil, err
	}
	if err := s.switchDual(c.acct, on); err != nil {
		return nil, err
	}
	return okAnswer, nil
}

// switchDual changes position mode with the exchange's preconditions. The exchange sends no user
// stream event for a position mode change (ACCOUNT_CONFIG_UPDATE covers leverage and multi-assets
// mode only), and neither does the simulator.
func (s *Sim) switchDual(a *account, on bool) error {
	if a.dual == on {
		return refuse(http.StatusBadRequest, codeNoNeedPositionSide, "No need to change position side.")
	}
	if len(a.openOrders("")) > 0 {
		return refuse(http.StatusBadRequest, codeOpenOrdersExist, "Position side cannot be changed if there exists open orders.")
	}
	for _, p := range a.pos {
		if !p.amt.IsZero() {
			return refuse(http.StatusBadRequest, codePositionExists, "Position side cannot be changed if there exists position.")
		}
	}
	a.dual = on
	a.pos = map[posKey]*position{}
	return nil
}

func (s *Sim) getMulti(c *call) (any, error) {
	return map[string]any{"multiAssetsMargin": c.acct.multi}, nil
}

func (s *Sim) postMulti(c *call) (any, error) {
	on, err := parseBool(c.params.Get("multiAssetsMargin"), "multiAssetsMargin")
	if err != nil {
		return nil, err
	}
	if err := s.switchMulti(c.acct, on, c.now); err != nil {
		return nil, err
	}
	return okAnswer, nil
}

// switchMulti changes multi-assets mode and sends ACCOUNT_CONFIG_UPDATE with "ai":{"j":on}.
func (s *Sim) switchMulti(a *account, on bool, now time.Time) error {
	if a.multi == on {
		return refuse(http.StatusBadRequest, codeMultiAssetsSame, "No need to change Multi-Assets mode.")
	}
	a.multi = on
	ms := now.UnixMilli()
	s.emit(a, map[string]any{"e": "ACCOUNT_CONFIG_UPDATE", "E": ms, "T": ms, "ai": map[string]any{"j": on}})
	return nil
}

func (s *Sim) postLeverage(c *call) (any, error) {
	ms, err := s.symbolParam(c, true)
	if err != nil {
		return nil, err
	}
	lev, err := strconv.Atoi(c.params.Get("leverage"))
	if err != nil {
		return nil, errMandatory("leverage")
	}
	if err := s.setLeverage(c.acct, ms[0].spec.Name, lev, c.now); err != nil {
		return nil, err
	}
	return map[string]any{"leverage": lev, "maxNotionalValue": "1000000", "symbol": ms[0].spec.Name}, nil
}

func (s *Sim) setLeverage(a *account, symbol string, lev int, now time.Time) error {
	if lev < 1 || lev > 125 {
		return refuse(http.StatusBadRequest, codeInvalidLeverage, "Leverage %d is not valid", lev)
	}
	a.leverage[symbol] = lev
	ms := now.UnixMilli()
	s.emit(a, map[string]any{"e": "ACCOUNT_CONFIG_UPDATE", "E": ms, "T": ms, "ac": map[string]any{"s": symbol, "l": lev}})
	return nil
}

// apiRestrictions is the spot API's key-permission read (GET /sapi/v1/account/apiRestrictions),
// served on the same address.
func (s *Sim) apiRestrictions(c *call) (any, error) {
	a := c.acct
	return map[string]any{
		"ipRestrict": false, "createTime": int64(1698645219000), "enableReading": true,
		"enableWithdrawals": a.withdraw, "enableInternalTransfer": false, "permitsUniversalTransfer": false,
		"enableVanillaOptions": false, "enableFutures": a.futures && !a.portfolio,
		"enablePortfolioMarginTrading": a.portfolio, "enableMargin": false, "enableSpotAndMarginTrading": false,
	}, nil
}

// SetHedgeMode switches an account's position mode as if the trader did it on the exchange's web
// page, with the exchange's preconditions (no open orders, no positions). No stream event follows:
// the exchange sends none for a position mode change.
func (s *Sim) SetHedgeMode(apiKey string, on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.accountOf(apiKey)
	if err != nil {
		return err
	}
	return s.switchDual(a, on)
}

// SetMultiAssetsMode switches multi-assets mode from outside and sends ACCOUNT_CONFIG_UPDATE.
func (s *Sim) SetMultiAssetsMode(apiKey string, on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.accountOf(apiKey)
	if err != nil {
		return err
	}
	return s.switchMulti(a, on, time.Now())
}

// SetLeverage changes a symbol's leverage from outside and sends ACCOUNT_CONFIG_UPDATE.
func (s *Sim) SetLeverage(apiKey, symbol string, lev int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.accountOf(apiKey)
	if err != nil {
		return err
	}
	if _, ok := s.markets[symbol]; !ok {
		return fmt.Errorf("binance sim: unknown symbol %q", symbol)
	}
	return s.setLeverage(a, symbol, lev, time.Now())
}
