// Package firm folds the firm area's read models: balance receipts, the
// firm's view of its accounts (halt, reconciliation hold), venues, webhook
// endpoints (never their secrets), the delivery log, Connect registrations and
// metered usage.
package firm

import (
	"fmt"
	"time"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evfirm "github.com/svc/engine/events/firm"
	evtenant "github.com/svc/engine/events/tenant"
	"github.com/svc/engine/projections"
)

// Collections of the firm area's read models.
const (
	CollReceipt       = "fw_receipt"        // tenantID/referenceId
	CollAccount       = "fw_account"        // accountID
	CollVenue         = "fw_venue"          // venueId -> tenantID
	CollWebhook       = "fw_webhook"        // tenantID/webhookId
	CollDelivery      = "fw_delivery"       // tenantID/seq/deliveryId, attempts
	CollRegistration  = "fw_registration"   // tenantID/registrationId
	CollRegistrationI = "fw_registration_i" // registrationId -> tenantID
	CollRegEmail      = "fw_registration_e" // email/tenantID/registrationId -> registrationId
	CollRegKey        = "fw_registration_k" // tenantID/key -> registrationId
	CollUsage         = "fw_usage"          // tenantID/YYYY-MM/accountID
	CollUsageMonth    = "fw_usage_month"    // tenantID/YYYY-MM
)

// Receipt is a balance operation's ledger entry as kept.
type Receipt struct {
	ReceiptView
	AccountID string         `json:"accountId"`
	Balance   events.Decimal `json:"balance"`
	Currency  string         `json:"currency"`
}

// ReceiptView is the receipt as served: exactly the spec's fields.
type ReceiptView struct {
	ReferenceID   string         `json:"referenceId"`
	AccountNumber string         `json:"accountNumber"`
	Op            string         `json:"op"`
	Amount        events.Decimal `json:"amount"`
	State         string         `json:"state"`
	AppliedAt     time.Time      `json:"appliedAt"`
}

// Account is the firm area's flags of one account.
type Account struct {
	Halted         bool `json:"halted"`
	Reconciliation bool `json:"reconciliationHold"`
}

// Webhook is an endpoint as the firm reads it: never its secret.
type Webhook struct {
	ID         string    `json:"id"`
	URL        string    `json:"url"`
	EventTypes []string  `json:"eventTypes"`
	CreatedAt  time.Time `json:"createdAt"`
}

// Delivery is one attempt of the delivery log.
type Delivery struct {
	ID            string     `json:"id"`
	DeliveryID    string     `json:"deliveryId"`
	WebhookID     string     `json:"webhookId"`
	EventType     string     `json:"eventType"`
	Attempt       int        `json:"attempt"`
	Status        string     `json:"status"`
	ResponseCode  *int       `json:"responseCode"`
	Error         *string    `json:"error"`
	CreatedAt     time.Time  `json:"createdAt"`
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
}

// Registration is a Connect pre-registration as read. Status is computed at
// read time from ExpiresAt (see StatusAt).
type Registration struct {
	ID            string     `json:"id"`
	Email         string     `json:"email"`
	AccountNumber *string    `json:"accountNumber"`
	LoginName     *string    `json:"loginName"`
	Provider      *string    `json:"provider"`
	Status        string     `json:"status"`
	ExpiresAt     time.Time  `json:"expiresAt"`
	LinkedAt      *time.Time `json:"linkedAt"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
}

// StatusAt is the registration as of time at: a pending one past its expiry is expired.
func (r Registration) StatusAt(at time.Time) Registration {
	if r.Status == "pending" && !at.Before(r.ExpiresAt) {
		r.Status = "expired"
	}
	return r
}

// Usage is one account's fills in one month.
type Usage struct {
	AccountID     string    `json:"accountId"`
	AccountNumber string    `json:"accountNumber"`
	Fills         int       `json:"fills"`
	FirstFillAt   time.Time `json:"firstFillAt"`
	LastFillAt    time.Time `json:"lastFillAt"`
}

// UsageMonth counts the distinct accounts that traded in one month.
type UsageMonth struct {
	Month    string `json:"month"`
	Accounts int    `json:"accounts"`
}

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Fold is the firm area's projection; it runs after projections.Core in the
// same transaction, so it reads the account documents Core keeps.
func Fold(tx projections.Tx, c events.Committed) error {
	switch {
	case events.IsKind(c.Subject, events.KindAccount):
		return foldAccount(tx, events.ID(c.Subject, events.KindAccount), c)
	case events.IsKind(c.Subject, events.KindFirm):
		return foldFirm(tx, events.ID(c.Subject, events.KindFirm), c)
	case events.IsKind(c.Subject, events.KindWebhook):
		return foldDeliveries(tx, c)
	case events.IsKind(c.Subject, events.KindTenant):
		for _, e := range c.Events {
			if e, ok := e.(evtenant.Created); ok && e.Kind == "firm" {
				if err := tx.Put(CollVenue, evfirm.VenueID(e.TenantID), e.TenantID); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func foldAccount(tx projections.Tx, id string, c events.Committed) error {
	a, ok, err := projections.TxGetInto[projections.Account](tx, projections.CollAccount, id)
	if err != nil || !ok {
		return err
	}
	var f Account
	if _, err := tx.Get(CollAccount, id, &f); err != nil {
		return err
	}
	flags := f
	for _, e := range c.Events {
		var err error
		switch e := e.(type) {
		case evacct.BalanceChanged:
			if e.ReferenceID != "" {
				err = tx.Put(CollReceipt, a.TenantID+"/"+e.ReferenceID, Receipt{ReceiptView: ReceiptView{ReferenceID: e.ReferenceID,
					AccountNumber: a.AccountNumber, Op: e.Op, Amount: e.Amount, State: "applied", AppliedAt: e.At},
					AccountID: id, Balance: e.Balance, Currency: a.Currency})
			}
		case evacct.AccountReset:
			for _, inst := range e.Cleared {
				if err = tx.Delete(projections.CollPosition, id+"/"+inst); err != nil {
					break
				}
			}
			a.Realized, a.Balance = events.Int(0), e.Balance
			if err == nil {
				err = tx.Put(projections.CollAccount, id, a)
			}
		case evacct.FirmHalted:
			flags.Halted = true
		case evacct.FirmResumed:
			flags.Halted = false
		case evacct.ReconciliationHeld:
			flags.Reconciliation = true
		case evacct.ReconciliationReleased:
			flags.Reconciliation = false
		case evacct.OrderFilled:
			err = foldUsage(tx, a, e)
		}
		if err != nil {
			return fmt.Errorf("firm fold %s at %d: %w", e.Type(), c.Seq, err)
		}
	}
	if flags != f {
		return tx.Put(CollAccount, id, flags)
	}
	return nil
}

func foldUsage(tx projections.Tx, a projections.Account, e evacct.OrderFilled) error {
	month := e.At.UTC().Format("2006-01")
	key := a.TenantID + "/" + month + "/" + a.AccountID
	u, ok, err := projections.TxGetInto[Usage](tx, CollUsage, key)
	if err != nil {
		return err
	}
	if !ok {
		u = Usage{AccountID: a.AccountID, AccountNumber: a.AccountNumber, FirstFillAt: e.At}
		var m UsageMonth
		if _, err := tx.Get(CollUsageMonth, a.TenantID+"/"+month, &m); err != nil {
			return err
		}
		m.Month, m.Accounts = month, m.Accounts+1
		if err := tx.Put(CollUsageMonth, a.TenantID+"/"+month, m); err != nil {
			return err
		}
	}
	u.Fills++
	if e.At.After(u.LastFillAt) {
		u.LastFillAt = e.At
	}
	if e.At.Before(u.FirstFillAt) {
		u.FirstFillAt = e.At
	}
	return tx.Put(CollUsage, key, u)
}

func foldFirm(tx projections.Tx, tenant string, c events.Committed) error {
	reg := func(id string, fn func(*Registration)) error {
		var r Registration
		if ok, err := tx.Get(CollRegistration, tenant+"/"+id, &r); err != nil || !ok {
			return err
		}
		fn(&r)
		r.UpdatedAt = c.At
		return tx.Put(CollRegistration, tenant+"/"+id, r)
	}
	for _, e := range c.Events {
		var err error
		switch e := e.(type) {
		case evfirm.WebhookRegistered:
			types := e.EventTypes
			if types == nil {
				types = []string{}
			}
			err = tx.Put(CollWebhook, tenant+"/"+e.WebhookID, Webhook{ID: e.WebhookID, URL: e.URL, EventTypes: types, CreatedAt: e.At})
		case evfirm.WebhookRemoved:
			err = tx.Delete(CollWebhook, tenant+"/"+e.WebhookID)
		case evfirm.RegistrationCreated:
			r := Registration{ID: e.RegistrationID, Email: e.Email, AccountNumber: strp(e.AccountNumber),
				LoginName: strp(e.LoginName), Provider: strp(e.Provider), Status: "pending", ExpiresAt: e.ExpiresAt,
				CreatedAt: e.At, UpdatedAt: e.At}
			err = tx.Put(CollRegistration, tenant+"/"+r.ID, r)
			if err == nil {
				err = tx.Put(CollRegistrationI, r.ID, tenant)
			}
			if err == nil {
				err = tx.Put(CollRegEmail, e.Email+"/"+tenant+"/"+r.ID, r.ID)
			}
			if err == nil {
				err = tx.Put(CollRegKey, tenant+"/"+RegKey(e.Email, e.Provider, e.AccountNumber), r.ID)
			}
		case evfirm.RegistrationRefreshed:
			err = reg(e.RegistrationID, func(r *Registration) { r.ExpiresAt, r.Status = e.ExpiresAt, "pending" })
		case evfirm.RegistrationRevoked:
			err = reg(e.RegistrationID, func(r *Registration) { r.Status = "revoked" })
		case evfirm.RegistrationLinked:
			at := e.At
			err = reg(e.RegistrationID, func(r *Registration) { r.Status, r.LinkedAt = "linked", &at })
		}
		if err != nil {
			return fmt.Errorf("firm fold %s at %d: %w", e.Type(), c.Seq, err)
		}
	}
	return nil
}

// RegKey is the read model's key of a registration's identity.
func RegKey(email, provider, accountNumber string) string {
	return email + "|" + provider + "|" + accountNumber
}

func foldDeliveries(tx projections.Tx, c events.Committed) error {
	for i, e := range c.Events {
		a, ok := e.(evfirm.DeliveryAttempted)
		if !ok {
			continue
		}
		d := Delivery{ID: fmt.Sprintf("%s-%d", a.DeliveryID, a.Attempt), DeliveryID: a.DeliveryID, WebhookID: a.WebhookID,
			EventType: a.EventType, Attempt: a.Attempt, Status: a.Status, Error: strp(a.Error), CreatedAt: a.At, NextAttemptAt: a.NextAt}
		if a.ResponseCode != 0 {
			code := a.ResponseCode
			d.ResponseCode = &code
		}
		if err := tx.Put(CollDelivery, fmt.Sprintf("%s/%s/%03d", a.TenantID, projections.SeqKey(c.Seq), i), d); err != nil {
			return err
		}
	}
	return nil
}
