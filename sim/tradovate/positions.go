package tradovate

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/sim/internal/dec"
)

// position is an account's position in one contract month: its entity and its open fills, paired
// first in, first out against fills the other way (the provider's fill pairs).
type position struct {
	ent  *positionEnt
	lots []lot
}

// lot is the unpaired part of a fill.
type lot struct {
	fill  *fillEnt
	qty   int64
	price *apd.Decimal
	buy   bool
}

func (a *account) netPos(contractID int64) int64 {
	p := a.positions[contractID]
	if p == nil {
		return 0
	}
	return p.ent.NetPos
}

func (a *account) positionList() []*position {
	out := make([]*position, 0, len(a.positions))
	for _, p := range a.positions {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ent.ID < out[j].ent.ID })
	return out
}

// applyFill moves an account's position and cash with a fill: bought/sold counts and values, fill
// pairs against the open fills the other way, realized P&L (price difference × quantity × the
// product's value per point) into the cash balance. It emits the position and the fill pairs;
// cash emits the cash balance (when the fill realized anything).
func (s *Sim) applyFill(a *account, c *contract, f *fillEnt, px *apd.Decimal, now time.Time) (cash func()) {
	u := a.user
	p := a.positions[c.id]
	created := p == nil
	if created {
		p = &position{ent: &positionEnt{ID: s.nextID(kindPosition), AccountID: a.id, ContractID: c.id, Timestamp: ts(now),
			TradeDate: tradeDateOf(now), BoughtValue: dnum(dec.Zero()), SoldValue: dnum(dec.Zero())}}
		a.positions[c.id] = p
	}
	buy := f.Action == "Buy"
	value := dec.Mul(dec.Int(f.Qty), px)
	if buy {
		p.ent.Bought += f.Qty
		p.ent.BoughtValue = dnum(dec.Add(p.ent.BoughtValue.dec(), value))
	} else {
		p.ent.Sold += f.Qty
		p.ent.SoldValue = dnum(dec.Add(p.ent.SoldValue.dec(), value))
	}
	realized := dec.Zero()
	left := f.Qty
	var pairs []*fillPairEnt
	for left > 0 && len(p.lots) > 0 && p.lots[0].buy != buy {
		l := &p.lots[0]
		q := min(left, l.qty)
		pair := &fillPairEnt{ID: s.nextID(kindFillPair), PositionID: p.ent.ID, Qty: q, Active: true}
		if buy {
			pair.BuyFillID, pair.SellFillID, pair.BuyPrice, pair.SellPrice = f.ID, l.fill.ID, dnum(px), dnum(l.price)
		} else {
			pair.BuyFillID, pair.SellFillID, pair.BuyPrice, pair.SellPrice = l.fill.ID, f.ID, dnum(l.price), dnum(px)
		}
		diff := dec.Sub(pair.SellPrice.dec(), pair.BuyPrice.dec())
		realized = dec.Add(realized, dec.Mul(dec.Mul(diff, dec.Int(q)), c.prod.vpp))
		l.fill.FinallyPaired += q
		f.FinallyPaired += q
		l.qty -= q
		left -= q
		if l.qty == 0 {
			p.lots = p.lots[1:]
		}
		pairs = append(pairs, pair)
	}
	if left > 0 {
		p.lots = append(p.lots, lot{fill: f, qty: left, price: px, buy: buy})
	}
	var net int64
	total := dec.Zero()
	var open int64
	for _, l := range p.lots {
		if l.buy {
			net += l.qty
		} else {
			net -= l.qty
		}
		total = dec.Add(total, dec.Mul(dec.Int(l.qty), l.price))
		open += l.qty
	}
	p.ent.NetPos = net
	p.ent.NetPrice = nil
	if open > 0 {
		p.ent.NetPrice = dnum(dec.Quantize(dec.Quo(total, dec.Int(open)), 9))
	}
	if created {
		s.emit(u, "position", "Created", p.ent)
	} else {
		s.emit(u, "position", "Updated", p.ent)
	}
	for _, pair := range pairs {
		u.fillPairs = append(u.fillPairs, pair)
		s.emit(u, "fillPair", "Created", pair)
	}
	if realized.IsZero() {
		return func() {}
	}
	a.amount = dec.Add(a.amount, realized)
	a.realized = dec.Add(a.realized, realized)
	a.weekReal = dec.Add(a.weekReal, realized)
	a.cashTime = now
	ent := s.cashEntity(a)
	return func() { s.emit(u, "cashBalance", "Updated", ent) }
}

// cashEntity is an account's CashBalance in US dollars.
func (s *Sim) cashEntity(a *account) *cashBalanceEnt {
	return &cashBalanceEnt{ID: a.cashID, AccountID: a.id, Timestamp: ts(a.cashTime), TradeDate: tradeDateOf(a.cashTime),
		CurrencyID: usdID, Amount: dnum(a.amount), RealizedPnL: dnum(a.realized), WeekRealizedPnL: dnum(a.weekReal)}
}

// openPnL is the account's unrealized P&L at the driven prices, (price − netPrice) × netPos × value
// per point summed over its positions, and its margins; open reports whether any position is open.
func (s *Sim) openPnL(a *account) (pnl, im, mm *apd.Decimal, open bool) {
	pnl, im, mm = dec.Zero(), dec.Zero(), dec.Zero()
	for cid, p := range a.positions {
		if p.ent.NetPos == 0 {
			continue
		}
		open = true
		c := s.contractsByID[cid]
		diff := dec.Sub(c.mkt.price, p.ent.NetPrice.dec())
		pnl = dec.Add(pnl, dec.Mul(dec.Mul(diff, dec.Int(p.ent.NetPos)), c.prod.vpp))
		n := dec.Int(p.ent.NetPos)
		n.Abs(n)
		im = dec.Add(im, dec.Mul(n, c.prod.im))
		mm = dec.Add(mm, dec.Mul(n, c.prod.mm))
	}
	return pnl, im, mm, open
}

// cashSnapshot answers cashBalance/getcashbalancesnapshot. As the provider documents, openPnL is left
// out without an open position, realizedPnL and weekRealizedPnL without a closed trade, and totalPnL
// when none of them is there.
func (s *Sim) cashSnapshot(u *user, body []byte) answer {
	var p struct {
		AccountID *int64 `json:"accountId"`
	}
	if a := decodeBody(body, &p); a != nil {
		return *a
	}
	if p.AccountID == nil {
		return badRequest("No usable value for accountId")
	}
	a := s.accounts[*p.AccountID]
	if a == nil || a.user != u {
		return ok(map[string]any{"errorText": "Access is denied"})
	}
	pnl, im, mm, open := s.openPnL(a)
	out := map[string]any{
		"totalCashValue":    dnum(a.amount),
		"netLiq":            dnum(dec.Add(a.amount, pnl)),
		"initialMargin":     dnum(im),
		"maintenanceMargin": dnum(mm),
	}
	total := dec.Zero()
	some := false
	if open {
		out["openPnL"] = dnum(pnl)
		total = dec.Add(total, pnl)
		some = true
	}
	if !a.realized.IsZero() {
		out["realizedPnL"] = dnum(a.realized)
		total = dec.Add(total, a.realized)
		some = true
	}
	if !a.weekReal.IsZero() {
		out["weekRealizedPnL"] = dnum(a.weekReal)
	}
	if some {
		out["totalPnL"] = dnum(total)
	}
	return ok(out)
}

// syncSnapshot answers user/syncrequest: everything of the user at once, in the provider's
// SyncMessage shape. On a socket it also starts the user's props events.
func (s *Sim) syncSnapshot(u *user, body []byte) answer {
	var p struct {
		Users    []int64 `json:"users"`
		Accounts []int64 `json:"accounts"`
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &p); err != nil {
			return badRequest("Invalid JSON: " + err.Error())
		}
	}
	for _, id := range p.Users {
		if id != u.id {
			return forbidden("Access is denied")
		}
	}
	for _, id := range p.Accounts {
		if a := s.accounts[id]; a == nil || a.user != u {
			return forbidden("Access is denied")
		}
	}
	list := func(kind string) []entity {
		all := entityKinds[kind].all(s, u)
		sort.SliceStable(all, func(i, j int) bool { return all[i].entID() < all[j].entID() })
		if all == nil {
			return []entity{}
		}
		return all
	}
	// The contracts, months and products the user's orders and positions refer to.
	used := map[int64]*contract{}
	for _, o := range u.orders {
		used[o.c.id] = o.c
	}
	for _, a := range u.accounts {
		for cid := range a.positions {
			used[cid] = s.contractsByID[cid]
		}
	}
	contracts, maturities, products := []entity{}, []entity{}, []entity{}
	seenProduct := map[int64]bool{}
	ids := make([]int64, 0, len(used))
	for id := range used {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	now := s.now()
	for _, id := range ids {
		c := used[id]
		contracts = append(contracts, c.entity())
		maturities = append(maturities, c.maturity(c.prod.front(now) == c))
		if !seenProduct[c.prod.id] {
			seenProduct[c.prod.id] = true
			products = append(products, c.prod.entity())
		}
	}
	return ok(map[string]any{
		"users":               []entity{s.userEntity(u)},
		"accounts":            list("account"),
		"accountRiskStatuses": []any{},
		"marginSnapshots":     []any{},
		"userAccountAutoLiqs": []any{},
		"cashBalances":        list("cashbalance"),
		"currencies":          list("currency"),
		"positions":           list("position"),
		"fillPairs":           list("fillpair"),
		"orders":              list("order"),
		"contracts":           contracts,
		"contractMaturities":  maturities,
		"products":            products,
		"exchanges":           list("exchange"),
		"spreadDefinitions":   []any{},
		"commands":            list("command"),
		"commandReports":      list("commandreport"),
		"executionReports":    list("executionreport"),
		"orderVersions":       list("orderversion"),
		"fills":               list("fill"),
		"orderStrategies":     []any{},
		"orderStrategyLinks":  []any{},
		"userProperties":      []any{},
		"properties":          []any{},
		"userPlugins":         []any{},
		"contractGroups":      list("contractgroup"),
		"orderStrategyTypes":  []any{},
	})
}
