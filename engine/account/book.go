package account

import (
	"slices"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/engine/fill"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// PriceDecimals is the precision of average prices; fills keep their exact price.
const PriceDecimals = 10

// CurrencyDecimals is how many decimals money posts in: 6 for USDC and USDT, else 2.
// Realized PnL is rounded half-even to it, so a balance is always the exact sum
// of its postings.
func CurrencyDecimals(currency string) int32 {
	switch currency {
	case "USDC", "USDT":
		return 6
	}
	return 2
}

// book is the paper book inside one decision: it tracks the balance and the
// positions the decision's own events leave, so several fills in one commit chain.
type book struct {
	s         *State
	env       commands.Envelope
	mkt       trading.Market
	balance   events.Decimal
	positions []evacct.Position // the decision's own, by instrument: few, so a slice, not a map
	fills     int
	out       []events.Event
	terms     *trading.Terms // of the venue group the account was issued into, if any
	through   []string       // stops an earlier quote traded through (FillWorking.TradedThrough)
	touched   []string       // limits an earlier quote touched (FillWorking.Touched)
}

func newBook(s *State, env commands.Envelope, m trading.Market) *book {
	b := &book{s: s, env: env, mkt: m, balance: s.Balance}
	if s.GroupID != "" {
		b.terms = m.Terms[s.VenueID+"/"+s.GroupID]
	}
	return b
}

func (b *book) add(e events.Event) { b.out = append(b.out, e) }

func (b *book) position(instrument string) evacct.Position {
	for _, p := range b.positions {
		if p.Instrument == instrument {
			return p
		}
	}
	return b.s.Positions[instrument]
}

// setPosition records the position p the decision leaves on its instrument.
func (b *book) setPosition(p evacct.Position) {
	for i := range b.positions {
		if b.positions[i].Instrument == p.Instrument {
			b.positions[i] = p
			return
		}
	}
	b.positions = append(b.positions, p)
}

// market places and fully fills a market order at the touch in this commit.
func (b *book) market(id, clientOrderID, instrument, side string, qty events.Decimal, reduceOnly bool, q trading.Quote) {
	o := evacct.Order{BrokerOrderID: id, ClientOrderID: clientOrderID, Instrument: instrument, Side: side,
		OrderType: string(order.Market), Quantity: qty, TimeInForce: string(order.IOC), ReduceOnly: reduceOnly, CreatedAt: b.env.At}
	b.add(evacct.OrderPlaced{Order: o})
	b.match(&Working{Order: o}, q)
}

// match fills or triggers w against quote q by the paper book's fill rules
// (engine/fill) and reports whether it filled.
func (b *book) match(w *Working, q trading.Quote) bool {
	d := fill.At(fill.Of(w.Side, w.OrderType, w.LimitPrice, w.StopPrice, w.Triggered), q.Bid, q.Ask,
		fill.Seen{Through: slices.Contains(b.through, w.BrokerOrderID), Touched: slices.Contains(b.touched, w.BrokerOrderID)})
	if d.Trigger {
		b.add(evacct.StopTriggered{BrokerOrderID: w.BrokerOrderID, Price: d.TriggerAt, At: b.env.At})
		w.Triggered = true
	}
	if !d.Fill {
		return false
	}
	qty := w.Quantity.Sub(w.Filled)
	if w.ReduceOnly {
		qty = qty.Min(b.position(w.Instrument).Quantity.Abs())
	}
	if qty.Sign() <= 0 {
		return false
	}
	b.fill(w, qty, d.Price, q)
	return true
}

// fill records a fill of qty at price and the position and balance it leaves.
func (b *book) fill(w *Working, qty, price events.Decimal, q trading.Quote) {
	p := b.position(w.Instrument)
	mult := p.Multiplier
	if sp, ok := b.mkt.Specs[w.Instrument]; ok && sp.Multiplier.Sign() > 0 {
		mult = sp.Multiplier
	}
	if mult.Sign() <= 0 {
		mult = events.Int(1)
	}
	sq := signed(w.Side, qty)
	realized := events.Int(0)
	np := evacct.Position{Instrument: w.Instrument, Quantity: p.Quantity.Add(sq), AvgPrice: p.AvgPrice, Multiplier: mult}
	switch {
	case p.Quantity.IsZero() || p.Quantity.Sign() == sq.Sign():
		np.AvgPrice = p.Quantity.Abs().Mul(p.AvgPrice).Add(qty.Mul(price)).Quo(np.Quantity.Abs()).Round(PriceDecimals)
	default:
		closing := qty.Min(p.Quantity.Abs())
		diff := price.Sub(p.AvgPrice)
		if p.Quantity.Sign() < 0 {
			diff = diff.Neg()
		}
		realized = diff.Mul(closing).Mul(mult).Round(CurrencyDecimals(b.s.Currency))
		switch {
		case np.Quantity.IsZero():
			np.AvgPrice = events.Int(0)
		case np.Quantity.Sign() != p.Quantity.Sign():
			np.AvgPrice = price
		}
	}
	b.setPosition(np)
	b.balance = b.balance.Add(realized)
	var fee *events.Decimal
	if c := commission(b.terms, p, w.Side, qty, w.Filled.IsZero(), b.s.Currency); c.Sign() > 0 {
		b.balance, fee = b.balance.Sub(c), &c
	}
	filled := w.Filled.Add(qty)
	avg := w.Filled.Mul(w.AvgPrice).Add(qty.Mul(price)).Quo(filled).Round(PriceDecimals)
	b.fills++
	touch := price
	b.add(evacct.OrderFilled{
		BrokerOrderID: w.BrokerOrderID, FillID: b.env.DerivedID("f", b.fills), Instrument: w.Instrument,
		Side: w.Side, Quantity: qty, Price: price, Realized: realized, Position: np, Balance: b.balance,
		OrderFilled: filled, OrderAvgPrice: avg, Done: filled.Cmp(w.Quantity) >= 0 || w.ReduceOnly,
		Quote: &touch, Commission: fee, At: b.env.At,
	})
	w.Filled, w.AvgPrice = filled, avg
}
