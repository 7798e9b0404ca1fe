package account

import (
	"fmt"

	"github.com/svc/engine/domain/parts"
	"github.com/svc/engine/events"
	evidem "github.com/svc/engine/events/idem"
)

// History is what Apply only ever adds to, in the order it added it: the
// clientOrderIds (ClientOrderIDs), the balance references (References) and
// the Idempotency-Keys of keyed writes (Idem), which grow with every order
// and operation the account ever had. It is kept beside the maps Decide
// looks them up in so that a snapshot takes it in the account's mailbox as
// three slice headers and encodes it outside (SnapshotParts, with the
// realized fills): the part of a snapshot that grows with the account's
// history never holds the mailbox.
// An element, once appended, is never written again, so a slice's first n
// elements may be read while Apply appends after them. Only Apply writes it
// (and JoinSnapshot, reading a snapshot back).
type History struct {
	Orders    [][2]string // clientOrderId, order or bracket id: the index's whole entries (orderindex.go)
	OrderKeys [][2]uint64 // clientOrderId's hash, the sequence of the commit that placed it
	// The provider's client order ids of a provider account's orders, as
	// the index keeps them (orderindex.go): whole, and as keys.
	ProviderOrders [][2]string
	ProviderKeys   [][2]uint64
	Refs           [][2]string      // referenceId, request digest
	Keys           []evidem.KeyUsed // as Idem.Apply folded them
}

// The names of the lists a snapshot keeps apart (SnapshotParts).
const (
	listOrders     = "clientOrderIds"
	listOrderKeys  = "clientOrderKeys"
	listProvOrders = "providerOrderIds"
	listProvKeys   = "providerOrderKeys"
	listRefs       = "references"
	listKeys       = "idempotencyKeys"
	listFills      = "fills"
)

// SnapshotParts splits the state for a snapshot; it runs in the account's
// mailbox. Only Apply writes the history maps, and it appends each entry to
// the history as it does. head is the state without its history maps and
// its realized fills, to encode there and then (it shares what Apply
// changes in place). The lists are the history and the fills as they
// stand, to encode anywhere later (engine/snapshot stores them in segments
// written once each): they hold only elements Apply never writes again.
// JoinSnapshot is its inverse.
func (s *State) SnapshotParts() (head any, lists []parts.List) {
	hs := s.History
	orders := []parts.List{
		{Name: listOrders, Items: hs.Orders[:len(hs.Orders):len(hs.Orders)]},
		{Name: listOrderKeys, Items: hs.OrderKeys[:len(hs.OrderKeys):len(hs.OrderKeys)]},
		{Name: listProvOrders, Items: hs.ProviderOrders[:len(hs.ProviderOrders):len(hs.ProviderOrders)]},
		{Name: listProvKeys, Items: hs.ProviderKeys[:len(hs.ProviderKeys):len(hs.ProviderKeys)]},
	}
	if len(s.References) > len(hs.Refs) || len(s.Idem) > len(hs.Keys) {
		// The maps hold entries the history lacks (written other than by
		// Apply): the head keeps them whole, slower but complete. The
		// clientOrderId index is only ever written by Apply.
		return s, orders
	}
	h := *s
	h.References, h.Idem = nil, nil
	fills := s.Risk.Fills
	if len(fills) > 0 {
		h.Risk.Fills = nil // in the list; an empty one stays in the head, apart from nil
	}
	return &h, append(orders,
		parts.List{Name: listRefs, Items: hs.Refs[:len(hs.Refs):len(hs.Refs)]},
		parts.List{Name: listKeys, Items: hs.Keys[:len(hs.Keys):len(hs.Keys)]},
		parts.List{Name: listFills, Base: s.Risk.FillsFrom, Items: fills[:len(fills):len(fills)]},
	)
}

// JoinSnapshot folds a snapshot's lists (SnapshotParts) into a state
// decoded from its head: the history and the history maps, in their order,
// and the realized fills from the index the head says its fills start at.
func (s *State) JoinSnapshot(lists []parts.Joined) error {
	var t History
	var err error
	for _, l := range lists {
		switch l.Name {
		case listOrders:
			t.Orders, err = joined[[2]string](l)
		case listOrderKeys:
			t.OrderKeys, err = joined[[2]uint64](l)
		case listProvOrders:
			t.ProviderOrders, err = joined[[2]string](l)
		case listProvKeys:
			t.ProviderKeys, err = joined[[2]uint64](l)
		case listRefs:
			t.Refs, err = joined[[2]string](l)
		case listKeys:
			t.Keys, err = joined[evidem.KeyUsed](l)
		case listFills:
			if l.Base != s.Risk.FillsFrom {
				return fmt.Errorf("account %s: snapshot fills from %d, its head's from %d", s.ID, l.Base, s.Risk.FillsFrom)
			}
			var fills []Realized
			if fills, err = joined[Realized](l); len(fills) > 0 {
				s.Risk.Fills = fills
			}
		default:
			err = fmt.Errorf("no list named %q", l.Name)
		}
		if err != nil {
			return fmt.Errorf("account %s: snapshot list %s: %w", s.ID, l.Name, err)
		}
	}
	if s.References == nil {
		s.References = make(map[string]string, len(t.Refs))
	}
	if s.Idem == nil {
		s.Idem = make(map[string]evidem.KeyUsed, len(t.Keys))
	}
	s.Orders.orders.join(t.OrderKeys, t.Orders)
	s.Orders.provider.join(t.ProviderKeys, t.ProviderOrders)
	for _, p := range t.Refs {
		s.References[p[0]] = p[1]
	}
	for _, k := range t.Keys {
		s.Idem.Apply(k)
	}
	s.History.Orders = append(s.History.Orders, t.Orders...)
	s.History.OrderKeys = append(s.History.OrderKeys, t.OrderKeys...)
	s.History.ProviderOrders = append(s.History.ProviderOrders, t.ProviderOrders...)
	s.History.ProviderKeys = append(s.History.ProviderKeys, t.ProviderKeys...)
	s.History.Refs = append(s.History.Refs, t.Refs...)
	s.History.Keys = append(s.History.Keys, t.Keys...)
	return nil
}

// joined decodes a list's parts, JSON arrays of T, into one slice.
func joined[T any](l parts.Joined) ([]T, error) {
	var out []T
	for _, b := range l.Parts {
		var p []T
		if err := events.UnmarshalStored(b, &p); err != nil {
			return nil, err
		}
		out = append(out, p...)
	}
	return out, nil
}
