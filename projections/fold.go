package projections

import (
	"fmt"
	"sync"
	"time"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evorg "github.com/svc/engine/events/org"
	evplan "github.com/svc/engine/events/plan"
	evtenant "github.com/svc/engine/events/tenant"
	evvenue "github.com/svc/engine/events/venue"
)

// SeqKey renders a sequence so that keys sort in sequence order.
func SeqKey(seq uint64) string {
	var b [20]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + seq%10)
		seq /= 10
	}
	return string(b[:])
}

// Fold is one projection: it applies one commit inside a store transaction.
type Fold func(tx Tx, c events.Committed) error

// Core folds tenants, keys, accounts, orders, fills, positions, daily PnL
// and the paper book's mark stacks.
func Core(tx Tx, c events.Committed) error {
	switch {
	case events.IsKind(c.Subject, events.KindTenant):
		return foldTenant(tx, events.ID(c.Subject, events.KindTenant), c)
	case events.IsKind(c.Subject, events.KindAccount):
		return foldAccount(tx, events.ID(c.Subject, events.KindAccount), c)
	case events.IsKind(c.Subject, events.KindOrg):
		return foldOrg(tx, events.ID(c.Subject, events.KindOrg), c)
	case events.IsKind(c.Subject, events.KindPlans):
		return foldPlans(tx, events.ID(c.Subject, events.KindPlans), c)
	case events.IsKind(c.Subject, events.KindVenue):
		return foldVenue(tx, events.ID(c.Subject, events.KindVenue), c)
	case events.IsKind(c.Subject, events.KindApp):
		return foldApp(tx, events.ID(c.Subject, events.KindApp), c)
	case events.IsKind(c.Subject, events.KindLink):
		return foldLink(tx, events.ID(c.Subject, events.KindLink), c)
	case events.IsKind(c.Subject, events.KindMark):
		return foldMark(tx, events.ID(c.Subject, events.KindMark), c)
	}
	return nil
}

func foldVenue(tx Tx, id string, c events.Committed) error {
	for _, e := range c.Events {
		var err error
		switch e := e.(type) {
		case evvenue.Created:
			v := Venue{VenueID: id, OrgID: e.OrgID, FirmTenantID: e.FirmTenantID, Name: e.Name, CreatedBy: e.CreatedBy, CreatedAt: e.At}
			if err = tx.Put(CollVenue, id, v); err == nil {
				err = tx.Put(CollOrgVenue, e.OrgID+"/"+id, id)
			}
		case evvenue.KeyIssued:
			var v Venue
			if _, err = tx.Get(CollVenue, id, &v); err != nil {
				break
			}
			k := Key{KeyID: e.KeyID, TenantID: v.FirmTenantID, Digest: e.Digest, Kind: "venue", Prefix: e.Prefix, CreatedAt: e.At,
				Name: e.Name, ExpiresAt: e.ExpiresAt, VenueID: id, Scopes: e.Scopes, Env: e.Env, CreatedBy: e.CreatedBy}
			if err = tx.Put(CollKey, e.Digest, k); err == nil {
				if err = tx.Put(CollKeyID, e.KeyID, e.Digest); err == nil {
					err = tx.Put(CollVenueKey, id+"/"+e.KeyID, e.Digest)
				}
			}
		case evvenue.KeyRevoked:
			err = revokeKey(tx, e.KeyID)
		case evvenue.ProviderRegistered:
			err = tx.Put(CollProvider, id+"/"+e.Provider.ID, e.Provider)
		case evvenue.PolicyStated:
			var owner string
			var ok bool
			if ok, err = tx.Get(CollPolicyOwner, e.PolicyID, &owner); err == nil && !ok {
				err = tx.Put(CollPolicyOwner, e.PolicyID, id)
			}
		case evvenue.ConfigSet:
			k := id + "/" + e.Kind + "/" + e.ID
			c := VenueConfig{Kind: e.Kind, ID: e.ID, CreatedAt: e.At}
			if _, err = tx.Get(CollVenueConfig, k, &c); err == nil {
				c.Version, c.Retired, c.UpdatedAt = e.Version, e.Retired, e.At
				if !e.Retired {
					c.Spec = e.Body
				}
				err = tx.Put(CollVenueConfig, k, c)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func foldPlans(tx Tx, owner string, c events.Committed) error {
	for _, e := range c.Events {
		var err error
		switch e := e.(type) {
		case evplan.Saved:
			p := Plan{ID: e.PlanID, CreatedAt: e.At}
			if _, err = tx.Get(CollPlan, owner+"/"+e.PlanID, &p); err == nil {
				p.Revision, p.Spec, p.Requires, p.UpdatedAt = e.Revision, e.Spec, evplan.Requires(e.Spec), e.At
				err = tx.Put(CollPlan, owner+"/"+e.PlanID, p)
			}
		case evplan.Deleted:
			err = tx.Delete(CollPlan, owner+"/"+e.PlanID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func foldOrg(tx Tx, id string, c events.Committed) error {
	join := func(userID, email, role string, at time.Time) error {
		if err := tx.Put(CollOrgMember, id+"/"+userID, OrgMember{UserID: userID, Email: email, Role: role, JoinedAt: at}); err != nil {
			return err
		}
		if err := tx.Delete(CollOrgInvite, id+"/"+email); err != nil {
			return err
		}
		return tx.Put(CollUserOrg, userID+"/"+id, role)
	}
	for _, e := range c.Events {
		var err error
		switch e := e.(type) {
		case evorg.Created:
			if err = tx.Put(CollOrg, id, Org{OrgID: id, Name: e.Name, CreatedAt: e.At}); err == nil {
				err = join(e.OwnerID, e.OwnerEmail, "owner", e.At)
			}
		case evorg.MemberInvited:
			err = tx.Put(CollOrgInvite, id+"/"+e.Email, OrgInvite{Email: e.Email, Role: e.Role, InvitedAt: e.At})
		case evorg.MemberJoined:
			err = join(e.UserID, e.Email, e.Role, e.At)
		case evorg.MemberRemoved:
			if err = tx.Delete(CollOrgMember, id+"/"+e.UserID); err == nil {
				err = tx.Delete(CollUserOrg, e.UserID+"/"+id)
			}
		case evorg.InvitationWithdrawn:
			err = tx.Delete(CollOrgInvite, id+"/"+e.Email)
		}
		if err != nil {
			return err
		}
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
			if e.Kind == "user" {
				if err := tx.Put(CollUser, id, User{UserID: id, Email: e.Email, CreatedAt: e.At}); err != nil {
					return err
				}
			}
		case evtenant.KeyIssued:
			k := Key{KeyID: e.KeyID, TenantID: id, Digest: e.Digest, Kind: e.Kind, Prefix: e.Prefix, CreatedAt: e.At,
				Name: e.Name, ExpiresAt: e.ExpiresAt}
			if err := tx.Put(CollKey, e.Digest, k); err != nil {
				return err
			}
			if err := tx.Put(CollKeyID, e.KeyID, e.Digest); err != nil {
				return err
			}
			if err := tx.Put(CollTenantKey, id+"/"+e.KeyID, e.Digest); err != nil {
				return err
			}
		case evtenant.PasswordSet:
			if err := editUser(tx, id, func(u *User) { u.PasswordHash = e.Hash }); err != nil {
				return err
			}
		case evtenant.EmailVerified:
			if err := editUser(tx, id, func(u *User) { u.EmailVerified = true }); err != nil {
				return err
			}
		case evtenant.SessionStarted:
			if err := tx.Put(CollSession, e.SessionID, Session{SessionID: e.SessionID, UserID: id, StartedAt: e.At, ExpiresAt: e.ExpiresAt}); err != nil {
				return err
			}
		case evtenant.SessionEnded:
			var s Session
			if ok, err := tx.Get(CollSession, e.SessionID, &s); err != nil || !ok {
				return err
			}
			s.Ended = true
			if err := tx.Put(CollSession, e.SessionID, s); err != nil {
				return err
			}
		case evtenant.OperatorGranted:
			var err error
			if len(e.Scopes) == 0 {
				err = tx.Delete(CollOperator, e.VenueID+"/"+id)
			} else {
				err = tx.Put(CollOperator, e.VenueID+"/"+id, Operator{VenueID: e.VenueID, UserID: id, Scopes: e.Scopes})
			}
			if err != nil {
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

// editUser applies fn to the user id, if there is one (a tenant of kind user).
func editUser(tx Tx, id string, fn func(*User)) error {
	var u User
	if ok, err := tx.Get(CollUser, id, &u); err != nil || !ok {
		return err
	}
	fn(&u)
	return tx.Put(CollUser, id, u)
}

// orderEdits are the orders one commit touches, written once at its end:
// a market order placed and filled in one commit is stored once, filled,
// and never enters the working index.
type orderEdits struct {
	tx        Tx
	accountID string
	edits     []orderEdit
	fill      *Fill // where a fill is made before it is put (putPacked)
}

// foldBufs is what an account's fold reuses from commit to commit: the
// orders it edits and the fill it puts.
type foldBufs struct {
	edits []orderEdit
	fill  Fill
}

// editBufs holds foldBufs between commits: a fold allocates no order twice
// (once in its edits, once in the store).
var editBufs = sync.Pool{New: func() any { return new(foldBufs) }}

// putPacked is Put, or Insert when insert, of a packable document: doc
// itself to a store that packs it before returning (PacksOnPut), else a
// copy of it, which the store may keep (Put's contract): doc may be memory
// the fold reuses.
func putPacked[T any, P interface {
	*T
	Packable
}](tx Tx, coll, key string, doc P, insert bool) error {
	if _, ok := tx.(PacksOnPut); !ok {
		c := P(new(T))
		*c = *doc
		doc = c
	}
	if insert {
		return Insert(tx, coll, key, doc)
	}
	return tx.Put(coll, key, doc)
}

type orderEdit struct {
	o          Order
	isNew      bool
	wasWorking bool // as stored before the commit
}

func (oe *orderEdits) add(o Order) { oe.edits = append(oe.edits, orderEdit{o: o, isNew: true}) }

// update applies e's change (changeOrder) to the order, read from this
// commit's edits or the store; an unknown order is left alone.
func (oe *orderEdits) update(orderID string, e events.Event) error {
	for i := range oe.edits {
		if oe.edits[i].o.BrokerOrderID == orderID {
			changeOrder(&oe.edits[i].o, e)
			return nil
		}
	}
	var o Order
	ok, err := oe.tx.Get(CollOrder, oe.accountID+"/"+orderID, &o)
	if err != nil || !ok {
		return err
	}
	w := o.Working()
	changeOrder(&o, e)
	oe.edits = append(oe.edits, orderEdit{o: o, wasWorking: w})
	return nil
}

// own records bracketID as the bracket of the order orderID where the order
// lacks it: a stop leg placed before the read model kept an order's bracket
// (Order.BracketID) shows its derived level once its bracket is recorded again.
func (oe *orderEdits) own(orderID, bracketID string) error {
	for i := range oe.edits {
		if oe.edits[i].o.BrokerOrderID == orderID {
			oe.edits[i].o.BracketID = bracketID
			return nil
		}
	}
	var o Order
	ok, err := oe.tx.Get(CollOrder, oe.accountID+"/"+orderID, &o)
	if err != nil || !ok || o.BracketID == bracketID {
		return err
	}
	o.BracketID = bracketID
	oe.edits = append(oe.edits, orderEdit{o: o, wasWorking: o.Working()})
	return nil
}

// flush writes every edited order, its sequence index when new and its
// working-index entry when that changed.
func (oe *orderEdits) flush() error {
	for i := range oe.edits {
		e := &oe.edits[i]
		o := &e.o // put through putPacked: the edits' buffer is reused by the next commit
		wk := oe.accountID + "/" + SeqKey(o.Seq) + "/" + o.BrokerOrderID
		if e.isNew {
			if err := Insert(oe.tx, CollOrderSeq, wk, o.BrokerOrderID); err != nil {
				return err
			}
		}
		var err error
		switch w := o.Working(); {
		case w && !e.wasWorking:
			err = oe.tx.Put(CollWorking, wk, o.BrokerOrderID)
		case !w && e.wasWorking:
			err = oe.tx.Delete(CollWorking, wk)
		}
		if err != nil {
			return err
		}
		if err := putPacked(oe.tx, CollOrder, oe.accountID+"/"+o.BrokerOrderID, o, e.isNew); err != nil {
			return err
		}
	}
	return nil
}

func foldAccount(tx Tx, id string, c events.Committed) error {
	a := new(Account) // read into memory of its own and handed to Put: no second copy
	if _, err := tx.Get(CollAccount, id, a); err != nil {
		return err
	}
	buf := editBufs.Get().(*foldBufs)
	orders := orderEdits{tx: tx, accountID: id, edits: buf.edits[:0], fill: &buf.fill}
	defer func() {
		clear(orders.edits)
		buf.edits, buf.fill = orders.edits[:0], Fill{}
		editBufs.Put(buf)
	}()
	for _, ev := range c.Events {
		var err error
		switch e := ev.(type) {
		case evacct.Opened:
			*a = Account{AccountID: id, TenantID: e.TenantID, Broker: e.Broker, AccountNumber: e.AccountNumber,
				Label: e.Label, Currency: e.Currency, Kind: e.Kind, Email: e.Email, ReferenceID: e.ReferenceID,
				StartingBalance: e.StartingBalance, Balance: e.StartingBalance, VenueID: e.VenueID, GroupID: e.GroupID,
				AppID: e.AppID, Trader: e.Trader, CreatedAt: e.At}
			if err = tx.Put(CollTenantAccount, e.TenantID+"/"+id, id); err == nil {
				err = tx.Put(CollAccountNumber, e.Broker+"/"+e.AccountNumber, id)
			}
			if err == nil && e.Email != "" {
				err = tx.Put(CollEmailAccount, EmailKey(e.Email)+"/"+id, id)
			}
		case evacct.OrderPlaced:
			orders.add(placedOrder(id, c.Seq, e))
		case evacct.OrderFilled:
			err = foldFill(tx, &orders, id, a, c, e, ev)
		case evacct.OrderCanceled, evacct.OrderReplaced, evacct.StopTriggered:
			orderID, _ := orderChange(ev)
			err = orders.update(orderID, ev)
		case evacct.BalanceChanged:
			a.Balance = e.Balance
		case evacct.BalanceObserved: // a provider account's reading (clock observation)
			if e.Asset == a.Currency {
				a.Balance = e.Wallet
			}
		case evacct.PositionObserved:
			err = observePosition(tx, id, e)
		case evacct.ProviderLoginLost: // a login's account: the trader signs in again
			a.LoginLost = true
		case evacct.ProviderTokenRenewed:
			a.LoginLost = false
		case evacct.BracketSet:
			var known bool
			if known, err = tx.Get(CollBracket, id+"/"+e.Bracket.ID, new(evacct.Bracket)); err == nil {
				if !known {
					a.Brackets++
				}
				err = tx.Put(CollBracket, id+"/"+e.Bracket.ID, e.Bracket)
			}
			if st := e.Bracket.StopLeg(); err == nil && st != nil && Follows(&e.Bracket) {
				err = orders.own(st.ID, e.Bracket.ID)
			}
		case evacct.BracketEnd:
			var known bool
			if known, err = tx.Get(CollBracket, id+"/"+e.BracketID, new(evacct.Bracket)); err == nil && known {
				a.Brackets--
				err = tx.Delete(CollBracket, id+"/"+e.BracketID)
			}
		}
		if err != nil {
			return fmt.Errorf("fold %s at %d: %w", ev.Type(), c.Seq, err)
		}
	}
	if err := orders.flush(); err != nil {
		return fmt.Errorf("fold orders at %d: %w", c.Seq, err)
	}
	a.Revision, a.UpdatedAt = c.Seq, c.At
	return tx.Put(CollAccount, id, a)
}

// foldFill folds e, which ev holds.
func foldFill(tx Tx, orders *orderEdits, id string, a *Account, c events.Committed, e evacct.OrderFilled, ev events.Event) error {
	a.Balance = e.Balance
	a.Realized = a.Realized.Add(e.Realized)
	fee := events.Int(0)
	if e.Commission != nil {
		fee = *e.Commission
		a.Commissions = a.Commissions.Add(fee)
	}
	err := orders.update(e.BrokerOrderID, ev)
	if err != nil {
		return err
	}
	f := orders.fill
	*f = Fill{FillID: e.FillID, BrokerOrderID: e.BrokerOrderID, Instrument: e.Instrument, Side: e.Side,
		Quantity: e.Quantity, Price: e.Price, RealizedPnl: e.Realized, Commission: fee, Time: e.At}
	if err := putPacked(tx, CollFill, id+"/"+SeqKey(c.Seq)+"/"+e.FillID, f, true); err != nil {
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
	var buf [10]byte
	key := id + "/" + string(e.At.UTC().AppendFormat(buf[:0], "2006-01-02"))
	d := new(PnLDay)
	if ok, err := tx.Get(CollPnLDay, key, d); err != nil {
		return err
	} else if !ok {
		*d = PnLDay{Date: key[len(id)+1:], RealizedPnl: events.Int(0)}
	}
	d.RealizedPnl, d.Balance, d.Fills = d.RealizedPnl.Add(e.Realized), e.Balance, d.Fills+1
	return tx.Put(CollPnLDay, key, d)
}

// observePosition folds a provider's reading of a position.
func observePosition(tx Tx, id string, e evacct.PositionObserved) error {
	pk := id + "/" + e.Position.Instrument
	if e.Position.Quantity.IsZero() {
		return tx.Delete(CollPosition, pk)
	}
	return tx.Put(CollPosition, pk, Position{Instrument: e.Position.Instrument, Quantity: e.Position.Quantity,
		AvgPrice: e.Position.AvgPrice, Multiplier: e.Position.Multiplier, UpdatedAt: e.At})
}
