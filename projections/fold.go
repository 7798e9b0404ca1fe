package projections

import (
	"fmt"
	"strings"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evtenant "github.com/svc/engine/events/tenant"
)

// SeqKey renders a sequence so that keys sort in sequence order.
func SeqKey(seq uint64) string { return fmt.Sprintf("%020d", seq) }

// Fold is one projection: it applies one commit inside a store transaction.
type Fold func(tx Tx, c events.Committed) error

// Core folds tenants, keys, accounts, orders, fills, positions and daily PnL.
func Core(tx Tx, c events.Committed) error {
	switch {
	case strings.HasPrefix(c.Subject, "evt.tenant."):
		return foldTenant(tx, strings.TrimPrefix(c.Subject, "evt.tenant."), c)
	case strings.HasPrefix(c.Subject, "evt.account."):
		return foldAccount(tx, strings.TrimPrefix(c.Subject, "evt.account."), c)
	}
	return nil
}

func foldTenant(tx Tx, id string, c events.Committed) error {
	for _, e := range c.Events {
		switch e := e.(type) {
		case evtenant.Created:
			if err := tx.Put(CollTenant, id, Tenant{TenantID: id, Name: e.Name, Kind: e.Kind, Email: e.Email, CreatedAt: e.At}); err != nil {
				return err
			}
		case evtenant.KeyIssued:
			k := Key{KeyID: e.KeyID, TenantID: id, Digest: e.Digest, Kind: e.Kind, Prefix: e.Prefix, CreatedAt: e.At}
			if err := tx.Put(CollKey, e.Digest, k); err != nil {
				return err
			}
			if err := tx.Put(CollKeyID, e.KeyID, e.Digest); err != nil {
				return err
			}
		case evtenant.KeyRevoked:
			var digest string
			if ok, err := tx.Get(CollKeyID, e.KeyID, &digest); err != nil || !ok {
				return err
			}
			var k Key
			if ok, err := tx.Get(CollKey, digest, &k); err != nil || !ok {
				return err
			}
			k.Revoked = true
			if err := tx.Put(CollKey, digest, k); err != nil {
				return err
			}
		}
	}
	return nil
}

func foldAccount(tx Tx, id string, c events.Committed) error {
	var a Account
	if _, err := tx.Get(CollAccount, id, &a); err != nil {
		return err
	}
	for _, e := range c.Events {
		var err error
		switch e := e.(type) {
		case evacct.Opened:
			a = Account{AccountID: id, TenantID: e.TenantID, Broker: e.Broker, AccountNumber: e.AccountNumber,
				Label: e.Label, Currency: e.Currency, Kind: e.Kind, Email: e.Email, ReferenceID: e.ReferenceID,
				StartingBalance: e.StartingBalance, Balance: e.StartingBalance, CreatedAt: e.At}
			if err = tx.Put(CollTenantAccount, e.TenantID+"/"+id, id); err == nil {
				err = tx.Put(CollAccountNumber, e.Broker+"/"+e.AccountNumber, id)
			}
		case evacct.OrderPlaced:
			o := e.Order
			err = putOrder(tx, id, Order{AccountID: id, BrokerOrderID: o.BrokerOrderID, ClientOrderID: o.ClientOrderID,
				Instrument: o.Instrument, Side: o.Side, OrderType: o.OrderType, Quantity: o.Quantity,
				LimitPrice: o.LimitPrice, StopPrice: o.StopPrice, TimeInForce: o.TimeInForce, ReduceOnly: o.ReduceOnly,
				State: "working", FilledQuantity: events.Int(0), CreatedAt: o.CreatedAt, UpdatedAt: o.CreatedAt, Seq: c.Seq}, true)
		case evacct.OrderFilled:
			err = foldFill(tx, id, &a, c, e)
		case evacct.OrderCanceled:
			err = updateOrder(tx, id, e.BrokerOrderID, func(o *Order) { o.State, o.UpdatedAt = "canceled", e.At })
		case evacct.OrderReplaced:
			err = updateOrder(tx, id, e.BrokerOrderID, func(o *Order) {
				o.Quantity, o.UpdatedAt = e.Quantity, e.At
				if e.LimitPrice != nil {
					o.LimitPrice = e.LimitPrice
				}
				if e.StopPrice != nil {
					o.StopPrice = e.StopPrice
				}
			})
		case evacct.StopTriggered:
			err = updateOrder(tx, id, e.BrokerOrderID, func(o *Order) { o.UpdatedAt = e.At })
		case evacct.BalanceChanged:
			a.Balance = e.Balance
		}
		if err != nil {
			return fmt.Errorf("fold %s at %d: %w", e.Type(), c.Seq, err)
		}
	}
	a.Revision, a.UpdatedAt = c.Seq, c.At
	return tx.Put(CollAccount, id, a)
}

func putOrder(tx Tx, accountID string, o Order, isNew bool) error {
	if isNew {
		if err := tx.Put(CollOrderSeq, accountID+"/"+SeqKey(o.Seq)+"/"+o.BrokerOrderID, o.BrokerOrderID); err != nil {
			return err
		}
	}
	wk := accountID + "/" + SeqKey(o.Seq) + "/" + o.BrokerOrderID
	var err error
	if o.Working() {
		err = tx.Put(CollWorking, wk, o.BrokerOrderID)
	} else {
		err = tx.Delete(CollWorking, wk)
	}
	if err != nil {
		return err
	}
	return tx.Put(CollOrder, accountID+"/"+o.BrokerOrderID, o)
}

func updateOrder(tx Tx, accountID, orderID string, fn func(*Order)) error {
	var o Order
	ok, err := tx.Get(CollOrder, accountID+"/"+orderID, &o)
	if err != nil || !ok {
		return err
	}
	fn(&o)
	return putOrder(tx, accountID, o, false)
}

func foldFill(tx Tx, id string, a *Account, c events.Committed, e evacct.OrderFilled) error {
	a.Balance = e.Balance
	a.Realized = a.Realized.Add(e.Realized)
	err := updateOrder(tx, id, e.BrokerOrderID, func(o *Order) {
		avg := e.OrderAvgPrice
		o.FilledQuantity, o.AvgFillPrice, o.UpdatedAt = e.OrderFilled, &avg, e.At
		o.State = "partially_filled"
		if e.Done {
			o.State = "filled"
		}
	})
	if err != nil {
		return err
	}
	f := Fill{FillID: e.FillID, BrokerOrderID: e.BrokerOrderID, Instrument: e.Instrument, Side: e.Side,
		Quantity: e.Quantity, Price: e.Price, RealizedPnl: e.Realized, Time: e.At}
	if err := tx.Put(CollFill, id+"/"+SeqKey(c.Seq)+"/"+e.FillID, f); err != nil {
		return err
	}
	pk := id + "/" + e.Instrument
	if e.Position.Quantity.IsZero() {
		err = tx.Delete(CollPosition, pk)
	} else {
		err = tx.Put(CollPosition, pk, Position{Instrument: e.Instrument, Quantity: e.Position.Quantity,
			AvgPrice: e.Position.AvgPrice, Multiplier: e.Position.Multiplier, UpdatedAt: e.At})
	}
	if err != nil {
		return err
	}
	day := e.At.UTC().Format("2006-01-02")
	var d PnLDay
	if ok, err := tx.Get(CollPnLDay, id+"/"+day, &d); err != nil {
		return err
	} else if !ok {
		d = PnLDay{Date: day, RealizedPnl: events.Int(0)}
	}
	d.RealizedPnl, d.Balance, d.Fills = d.RealizedPnl.Add(e.Realized), e.Balance, d.Fills+1
	return tx.Put(CollPnLDay, id+"/"+day, d)
}
