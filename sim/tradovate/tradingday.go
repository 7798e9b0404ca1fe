package tradovate

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/svc/engine/sim/internal/dec"
)

// Rejection is an exchange rejection queued for an account's next order: the order is accepted
// ({orderId}) and then rejected with Reason (one of the provider's reject reasons;
// "OtherExecutionRelated" when empty) and Text.
type Rejection struct {
	Reason string `json:"reason,omitempty"`
	Text   string `json:"text,omitempty"`
}

// RejectNext queues a rejection for the next order accepted on the account named accountName.
func (s *Sim) RejectNext(accountName string, r Rejection) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accountNamed(accountName)
	if a == nil {
		return fmt.Errorf("reject: no account %q", accountName)
	}
	a.rejectNext = append(a.rejectNext, r)
	return nil
}

func (s *Sim) accountNamed(name string) *account {
	for _, a := range s.accounts {
		if a.name == name {
			return a
		}
	}
	return nil
}

// SetSessionOpen opens or closes the trading session: while closed, placements fail with
// SessionClosed.
func (s *Sim) SetSessionOpen(open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessionOpen = open
}

// EndOfDay closes the trading day: working Day orders expire and each account's session realized
// P&L resets (the week's stays).
func (s *Sim) EndOfDay() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, u := range s.users {
		for _, o := range u.orders {
			if !o.final() && o.tif == "Day" {
				s.end(o, o.cmdID, "Expired", "Expired", "End of day", now)
			}
		}
		for _, a := range u.accounts {
			a.realized = dec.Zero()
			a.cashTime = now
			s.emit(u, "cashBalance", "Updated", s.cashEntity(a))
		}
	}
}

// PlaceOutside places an order on the account as if the trader placed it elsewhere (the provider's
// own application): it appears in reads and props events like any other. params is a placeorder
// body without the account; it answers the order id.
func (s *Sim) PlaceOutside(accountName string, params map[string]any) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accountNamed(accountName)
	if a == nil {
		return 0, fmt.Errorf("outside order: no account %q", accountName)
	}
	params["accountId"] = a.id
	body, err := json.Marshal(params)
	if err != nil {
		return 0, err
	}
	ans := s.placeOrder(a.user, nil, body, s.now())
	if ans.status != 200 {
		return 0, errors.New("outside order: " + ans.text)
	}
	m, _ := ans.body.(map[string]any)
	if id, ok := m["orderId"].(int64); ok {
		return id, nil
	}
	return 0, fmt.Errorf("outside order: %v", m["failureText"])
}
