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
// The same is kept of the provider's client order id of every order a
// provider account's book held (Provider.Orders keeps only the working
// ones): an observation of an order that ended long ago still names it.
//
// It also carries what is not state but folding and deciding need beside
// it (State holds exported fields only: events.UnmarshalStored reads it).
type OrderIndex struct {
	orders   keyIndex // clientOrderId: order or bracket id
	provider keyIndex // a provider's client order id: order id
	seq      uint64   // the sequence of the commit Fold is applying; 0: none known
	find     Finder   // reads a commit back (UseFinder)
}

// keyIndex is one index: a key's hash to the sequence of the commit that
// named it, and the keys kept whole.
type keyIndex struct {
	at    map[uint64]uint64
	exact map[string]string
}

// Finder reads the events of the commit at a sequence of the log (the
// engine's: a direct read, behind a bounded cache). The log never changes a
// commit, so what it answers for a sequence is the same every time.
type Finder func(seq uint64) ([]events.Event, error)

// ErrNoFinder: a decision needed a clientOrderId's commit and the state was
// given no way to read the log.
var ErrNoFinder = errors.New("account: the clientOrderId index needs the log to read a commit back and has no finder")

func newKeyIndex(keys, whole int) keyIndex {
	return keyIndex{at: make(map[uint64]uint64, keys), exact: make(map[string]string, whole)}
}

func newOrderIndex() OrderIndex {
	return OrderIndex{orders: newKeyIndex(0, 0), provider: newKeyIndex(0, 0)}
}

// keyHash is the index's hash of a key. Fixed across processes and
// versions: snapshots keep it.
func keyHash(key string) uint64 { return xxhash.Sum64String(key) }

// Len is how many clientOrderIds the index holds.
func (x *OrderIndex) Len() int { return len(x.orders.at) + len(x.orders.exact) }

// add records that the commit at seq (0: not known) named key as id, in
// keys as (hash, seq) when the hash has no key yet, whole otherwise.
func (k *keyIndex) add(key, id string, seq uint64, keys *[][2]uint64, whole *[][2]string) {
	if k.at == nil {
		*k = newKeyIndex(0, 0)
	}
	h := keyHash(key)
	if _, taken := k.at[h]; seq == 0 || taken {
		k.exact[key] = id
		*whole = append(*whole, [2]string{key, id})
		return
	}
	k.at[h] = seq
	*keys = append(*keys, [2]uint64{h, seq})
}

// lookup answers key's id: whole, or from the commit its hash names when
// that commit named key itself (in).
func (k *keyIndex) lookup(key string, find Finder, in func([]events.Event, string) (string, bool)) (string, bool, error) {
	if id, ok := k.exact[key]; ok {
		return id, true, nil
	}
	seq, ok := k.at[keyHash(key)]
	if !ok {
		return "", false, nil
	}
	if find == nil {
		return "", false, ErrNoFinder
	}
	evs, err := find(seq)
	if err != nil {
		return "", false, fmt.Errorf("the commit at %d that may hold %q: %w", seq, key, err)
	}
	id, ok := in(evs, key)
	return id, ok, nil
}

// join folds a snapshot's lists back.
func (k *keyIndex) join(keys [][2]uint64, whole [][2]string) {
	if k.at == nil {
		*k = newKeyIndex(len(keys), len(whole))
	}
	for _, p := range whole {
		k.exact[p[0]] = p[1]
	}
	for _, p := range keys {
		k.at[p[0]] = p[1]
	}
}

// addOrderKey records that the commit being folded placed clientOrderID as id.
func (s *State) addOrderKey(clientOrderID, id string) {
	s.Orders.orders.add(clientOrderID, id, s.Orders.seq, &s.History.OrderKeys, &s.History.Orders)
}

// addProviderKey records that the commit being folded placed the order id
// under the provider's client order id pcoid.
func (s *State) addProviderKey(pcoid, id string) {
	s.Orders.provider.add(pcoid, id, s.Orders.seq, &s.History.ProviderKeys, &s.History.ProviderOrders)
}

// UseFinder gives the state its way to read a commit back from the log.
// Not part of the state: a snapshot does not hold it, and the engine gives
// it again to every state it decides on.
func (s *State) UseFinder(f Finder) { s.Orders.find = f }

// OrderFor answers the order or bracket the account accepted under
// clientOrderID. An error is the log's (the commit could not be read): the
// caller decides nothing on it.
func (s *State) OrderFor(clientOrderID string) (id string, used bool, err error) {
	id, used, err = s.Orders.orders.lookup(clientOrderID, s.Orders.find, placedIn)
	if err != nil {
		err = fmt.Errorf("account %s: clientOrderId: %w", s.ID, err)
	}
	return id, used, err
}

// providerOrderFor answers the order the book held under the provider's
// client order id pcoid: a working one from Provider.Orders, an ended one
// from the index.
func (s *State) providerOrderFor(pcoid string) (id string, known bool, err error) {
	if id, ok := s.Provider.Orders[pcoid]; ok {
		return id, true, nil
	}
	id, known, err = s.Orders.provider.lookup(pcoid, s.Orders.find, func(evs []events.Event, pcoid string) (string, bool) {
		id, found := "", false
		for _, e := range evs {
			if p, ok := e.(evacct.OrderPlaced); ok && providerKey(s.ID, p.Order) == pcoid {
				id, found = p.Order.BrokerOrderID, true
			}
		}
		return id, found
	})
	if err != nil {
		err = fmt.Errorf("account %s: provider order: %w", s.ID, err)
	}
	return id, known, err
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
