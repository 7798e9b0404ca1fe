package account

import (
	"fmt"

	"github.com/svc/engine/events"
	evidem "github.com/svc/engine/events/idem"
)

// History is what Apply only ever adds to, in the order it added it: the
// clientOrderIds (ClientOrderIDs), the balance references (References) and
// the Idempotency-Keys of keyed writes (Idem), which grow with every order
// and operation the account ever had. It is kept beside the maps Decide
// looks them up in so that a snapshot takes it in the account's mailbox as
// three slice lengths and encodes it outside (SnapshotParts): the part of a
// snapshot that grows with the account's history never holds the mailbox.
// An element, once appended, is never written again, so a slice's first n
// elements may be read while Apply appends after them. Only Apply writes it
// (and JoinSnapshot, reading a snapshot back).
type History struct {
	Orders [][2]string      `json:"clientOrderIds"`  // clientOrderId, order or bracket id
	Refs   [][2]string      `json:"references"`      // referenceId, request digest
	Keys   []evidem.KeyUsed `json:"idempotencyKeys"` // as Idem.Apply folded them
}

// SnapshotParts splits the state for a snapshot; it runs in the account's
// mailbox. Only Apply writes the history maps, and it appends each entry to
// the history as it does. head is the state without its history maps, to
// encode there and then (it shares what Apply changes in place). tail is
// the history as it stands, to encode anywhere later: it holds only
// elements Apply never writes again. JoinSnapshot is its inverse.
func (s *State) SnapshotParts() (head, tail any) {
	hs := s.History
	if len(s.ClientOrderIDs) > len(hs.Orders) || len(s.References) > len(hs.Refs) || len(s.Idem) > len(hs.Keys) {
		// The maps hold entries the history lacks (written other than by
		// Apply): the head keeps them whole, slower but complete.
		return s, History{}
	}
	h := *s
	h.ClientOrderIDs, h.References, h.Idem = nil, nil, nil
	return &h, History{Orders: hs.Orders[:len(hs.Orders):len(hs.Orders)], Refs: hs.Refs[:len(hs.Refs):len(hs.Refs)],
		Keys: hs.Keys[:len(hs.Keys):len(hs.Keys)]}
}

// JoinSnapshot folds a snapshot's tail (SnapshotParts) into a state decoded
// from its head: the history maps and the history itself, in their order.
func (s *State) JoinSnapshot(tail []byte) error {
	var t History
	if err := events.UnmarshalStored(tail, &t); err != nil {
		return fmt.Errorf("account %s: snapshot history: %w", s.ID, err)
	}
	if s.ClientOrderIDs == nil {
		s.ClientOrderIDs = make(map[string]string, len(t.Orders))
	}
	if s.References == nil {
		s.References = make(map[string]string, len(t.Refs))
	}
	if s.Idem == nil {
		s.Idem = make(map[string]evidem.KeyUsed, len(t.Keys))
	}
	for _, p := range t.Orders {
		s.ClientOrderIDs[p[0]] = p[1]
	}
	for _, p := range t.Refs {
		s.References[p[0]] = p[1]
	}
	for _, k := range t.Keys {
		s.Idem.Apply(k)
	}
	s.History.Orders = append(s.History.Orders, t.Orders...)
	s.History.Refs = append(s.History.Refs, t.Refs...)
	s.History.Keys = append(s.History.Keys, t.Keys...)
	return nil
}
