package account

import (
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// OrderIndex answers, for every clientOrderId the account ever accepted,
// forever, which order or bracket it named (issue 46: the spec refuses a
// repeated clientOrderId with the earlier order). It keeps no string of a
// clientOrderId it learned from a commit at a known sequence: only the
// key's 64-bit hash and that sequence, 16 bytes in the map and 16 in the
// history a snapshot takes (History.OrderKeys), where the strings took
// about 200. A hit reads the commit at that sequence back from the log
// (Finder) and names the order only if the commit placed that very
// clientOrderId, so the index is exact: a hash two clientOrderIds share
// costs a read, never a false refusal, and the second is kept whole.
//
// Whole strings stay only for what has no key of its own: a clientOrderId
// folded without a sequence (Apply outside a commit: the pure tests), and
// one whose hash an earlier clientOrderId holds. Exact entries answer
// first, so a clientOrderId placed again (a provider's observation of an
// order the engine placed) names the latest order, as the map did.
//
// It also carries what is not state but folding and deciding need beside
// it (State holds exported fields only: events.UnmarshalStored reads it).
type OrderIndex struct {
	at    map[uint64]uint64 // key hash: the sequence of the commit that placed it
	exact map[string]string // clientOrderId: its order or bracket id
	seq   uint64            // the sequence of the commit Fold is applying; 0: none known
	find  Finder            // reads a commit back (UseFinder)
}

// Finder reads the events of the commit at a sequence of the log (the
// engine's: a direct read, behind a bounded cache). The log never changes a
// commit, so what it answers for a sequence is the same every time.
type Finder func(seq uint64) ([]events.Event, error)

// ErrNoFinder: a decision needed a clientOrderId's commit and the state was
// given no way to read the log.
var ErrNoFinder = errors.New("account: the clientOrderId index needs the log to read a commit back and has no finder")

func newOrderIndex() OrderIndex {
	return OrderIndex{at: map[uint64]uint64{}, exact: map[string]string{}}
}

// keyHash is the index's hash of a clientOrderId. Fixed across processes
// and versions: snapshots keep it.
func keyHash(clientOrderID string) uint64 { return xxhash.Sum64String(clientOrderID) }

// Len is how many clientOrderIds the index holds.
func (x *OrderIndex) Len() int { return len(x.at) + len(x.exact) }

// add records that the commit at seq (0: not known) placed clientOrderID as
// id, and says which history it goes to: the key (hash, seq) when it has a
// slot of its own, the whole pair otherwise.
func (s *State) addOrderKey(clientOrderID, id string) {
	x := &s.Orders
	h := keyHash(clientOrderID)
	if _, taken := x.at[h]; x.seq == 0 || taken {
		x.exact[clientOrderID] = id
		s.History.Orders = append(s.History.Orders, [2]string{clientOrderID, id})
		return
	}
	x.at[h] = x.seq
	s.History.OrderKeys = append(s.History.OrderKeys, [2]uint64{h, x.seq})
}

// UseFinder gives the state its way to read a commit back from the log.
// Not part of the state: a snapshot does not hold it, and the engine gives
// it again to every state it decides on.
func (s *State) UseFinder(f Finder) { s.Orders.find = f }

// OrderFor answers the order or bracket the account accepted under
// clientOrderID. An error is the log's (the commit could not be read): the
// caller decides nothing on it.
func (s *State) OrderFor(clientOrderID string) (id string, used bool, err error) {
	x := &s.Orders
	if id, ok := x.exact[clientOrderID]; ok {
		return id, true, nil
	}
	seq, ok := x.at[keyHash(clientOrderID)]
	if !ok {
		return "", false, nil
	}
	if x.find == nil {
		return "", false, ErrNoFinder
	}
	evs, err := x.find(seq)
	if err != nil {
		return "", false, fmt.Errorf("account %s: the commit at %d that may hold clientOrderId %q: %w", s.ID, seq, clientOrderID, err)
	}
	id, ok = placedIn(evs, clientOrderID)
	return id, ok, nil
}

// placedIn finds the order or bracket a commit's events accepted under
// clientOrderID, as Apply indexes them.
func placedIn(evs []events.Event, clientOrderID string) (string, bool) {
	id, found := "", false
	for _, e := range evs {
		switch e := e.(type) {
		case evacct.OrderPlaced:
			if e.Order.ClientOrderID == clientOrderID {
				id, found = e.Order.BrokerOrderID, true
			}
		case evacct.BracketSet:
			if e.Bracket.ClientOrderID == clientOrderID && clientOrderID != "" {
				id, found = e.Bracket.ID, true
			}
		}
	}
	return id, found
}

// Fold applies one commit's events at its sequence: the clientOrderIds it
// places are indexed by it (the mailbox's Kind.Fold).
func Fold(s *State, seq uint64, evs []events.Event) *State {
	s.Orders.seq = seq
	for _, e := range evs {
		s = Apply(s, e)
	}
	s.Orders.seq = 0
	return s
}

// OrderID is the order or bracket the account accepted under clientOrderID,
// "" when none (or when the log could not be read: OrderFor says which).
func (s *State) OrderID(clientOrderID string) string {
	id, _, _ := s.OrderFor(clientOrderID)
	return id
}
