// Package account is the trading account's aggregate: pure Decide and Apply
// over its state, with the paper book's fill rules.
package account

import (
	"time"

	"github.com/svc/engine/engine/idem"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evidem "github.com/svc/engine/events/idem"
)

// Working is an order that rests on the book.
type Working struct {
	evacct.Order
	Filled    events.Decimal
	AvgPrice  events.Decimal
	Triggered bool // a stop that triggered; a stop-limit now rests as a limit
	UpdatedAt time.Time
}

// State is an account as its commits leave it.
// Account state is owned by its mailbox goroutine; never touch it from another.
type State struct {
	ID              string
	Open            bool
	TenantID        string
	Broker          string
	AccountNumber   string
	Label           string
	Currency        string
	Kind            string
	Email           string
	VenueID         string // an account a venue issued into GroupID (venueterms.go)
	AppID           string // the Connect app it was opened or linked through (hosted Connect)
	GroupID         string
	StageVersion    string
	StartingBalance events.Decimal
	Balance         events.Decimal
	Realized        events.Decimal
	Positions       map[string]evacct.Position
	Working         map[string]*Working
	Orders          OrderIndex                 `json:"-"` // every clientOrderId ever accepted, to its order id (orderindex.go)
	References      map[string]string          // every balance referenceId, to a digest of its request
	Brackets        map[string]*evacct.Bracket // active brackets by id (bracket.go)
	Risk            Risk                       // risk controls and lock (risk.go)
	Firm            Firm                       // firm halt, reconciliation hold, ledger (firm.go)
	Idem            idem.Record                // Idempotency-Keys of the venue door's writes (firm.go)
	Eval            Eval                       // the evaluation of an enrolled account (eval.go)
	Provider        *Provider                  // an account that lives at a provider (provider.go); nil on the paper book
	History         History                    `json:"-"` // Orders, References and Idem as added (history.go)
}

// New is the state of an account with no commits.
func New(id string) *State {
	return &State{
		ID:         id,
		Positions:  map[string]evacct.Position{},
		Working:    map[string]*Working{},
		Orders:     newOrderIndex(),
		References: map[string]string{},
		Brackets:   map[string]*evacct.Bracket{},
		Idem:       idem.Record{},
	}
}

// StateVersion is the version of the account's state in snapshots
// (engine/snapshot.Shape): raise it when Apply folds an event differently,
// so that states folded by the old rules are rebuilt from the log instead of
// reused. A change of State's fields changes the shape by itself. 2: the
// snapshot holds the history apart (history.go). 3: clientOrderIds as keys
// (orderindex.go). 4: realized PnL a minute at a time (risk.go). 5: a
// provider account keeps its working orders' provider ids and rejected
// places only (provider.go).
const StateVersion = 5

// Apply folds one event into the state and returns it. Deterministic: replay of
// the log rebuilds the live state exactly.
func Apply(s *State, e events.Event) *State {
	switch e := e.(type) {
	case evacct.Opened:
		s.Open = true
		s.TenantID, s.Broker, s.AccountNumber, s.Label = e.TenantID, e.Broker, e.AccountNumber, e.Label
		s.Currency, s.Kind, s.Email = e.Currency, e.Kind, e.Email
		s.VenueID, s.GroupID, s.StageVersion, s.AppID = e.VenueID, e.GroupID, e.StageVersion, e.AppID
		s.StartingBalance, s.Balance = e.StartingBalance, e.StartingBalance
	case evacct.OrderPlaced:
		s.addOrderKey(e.Order.ClientOrderID, e.Order.BrokerOrderID)
		s.Working[e.Order.BrokerOrderID] = &Working{Order: e.Order, UpdatedAt: e.Order.CreatedAt}
		applyProviderOrder(s, e.Order)
		if s.Provider != nil {
			s.addProviderKey(providerKey(s.ID, e.Order), e.Order.BrokerOrderID)
		}
	case evacct.OrderFilled:
		s.Balance = e.Balance
		s.Realized = s.Realized.Add(e.Realized)
		riskFilled(s, e)
		applyEval(s, e)
		if e.Position.Quantity.IsZero() {
			delete(s.Positions, e.Instrument)
		} else {
			s.Positions[e.Instrument] = e.Position
		}
		applyProviderFill(s, e) // provider.go
		if w, ok := s.Working[e.BrokerOrderID]; ok {
			if e.Done {
				forgetProviderOrder(s, w.Order)
				delete(s.Working, e.BrokerOrderID)
			} else {
				w.Filled, w.AvgPrice, w.UpdatedAt = e.OrderFilled, e.OrderAvgPrice, e.At
			}
		}
	case evacct.OrderCanceled:
		if w, ok := s.Working[e.BrokerOrderID]; ok {
			forgetProviderOrder(s, w.Order)
		}
		delete(s.Working, e.BrokerOrderID)
	case evacct.OrderReplaced:
		if w, ok := s.Working[e.BrokerOrderID]; ok {
			w.Quantity, w.UpdatedAt = e.Quantity, e.At
			if e.LimitPrice != nil {
				w.LimitPrice = e.LimitPrice
			}
			if e.StopPrice != nil {
				w.StopPrice = e.StopPrice
			}
		}
	case evacct.StopTriggered:
		if w, ok := s.Working[e.BrokerOrderID]; ok {
			w.Triggered, w.UpdatedAt = true, e.At
		}
	case evacct.BracketSet:
		s.Brackets[e.Bracket.ID] = cloneBracket(&e.Bracket)
		if e.Bracket.ClientOrderID != "" {
			s.addOrderKey(e.Bracket.ClientOrderID, e.Bracket.ID)
		}
	case evacct.BracketEnd:
		delete(s.Brackets, e.BracketID)
	case evacct.BalanceChanged:
		s.Balance = e.Balance
		if e.ReferenceID != "" {
			s.References[e.ReferenceID] = e.Digest
			s.History.Refs = append(s.History.Refs, [2]string{e.ReferenceID, e.Digest})
		}
	default:
		applyProvider(s, e)
		applyRisk(s, e)
		applyFirm(s, e)
		applyEval(s, e)
		s.Idem.Apply(e)
		if k, ok := e.(evidem.KeyUsed); ok {
			s.History.Keys = append(s.History.Keys, k)
		}
	}
	return s
}

// Registry is the account's event registry.
func Registry() events.Registry { return evacct.Registry() }
