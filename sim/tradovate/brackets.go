package tradovate

import (
	"fmt"
	"time"
)

// placeOSO answers order/placeoso: the entry order and one or two brackets held (Suspended) until it
// fills; two brackets are an OCO pair.
func (s *Sim) placeOSO(u *user, sess *session, body []byte, now time.Time) answer {
	var p orderParams
	if a := decodeBody(body, &p); a != nil {
		return *a
	}
	if a := p.checkRequired(); a != nil {
		return *a
	}
	if p.Bracket1 == nil {
		return badRequest("No usable value for bracket1")
	}
	a, c, sp, f := s.checkEntry(u, &p, now)
	if f != nil {
		return f.answer()
	}
	var specs []spec
	for _, b := range []*bracketParam{p.Bracket1, p.Bracket2} {
		if b == nil {
			continue
		}
		bs, f := checkBracket(c, b, sp.qty)
		if f != nil {
			return f.answer()
		}
		specs = append(specs, bs)
	}
	o := s.newOrder(a, c, sp, sess, p.CustomTag50, p.IsAutomated, nil, now)
	res := map[string]any{"orderId": o.ent.ID}
	for i, bs := range specs {
		child := s.newOrder(a, c, bs, sess, p.CustomTag50, p.IsAutomated, o, now)
		o.children = append(o.children, child)
		res[fmt.Sprintf("oso%dId", i+1)] = child.ent.ID
	}
	if len(o.children) == 2 {
		s.link(o.children[0], o.children[1])
		for _, ch := range o.children {
			s.emitOrder(ch, "Updated")
		}
	}
	s.accept(o, now)
	return ok(res)
}

// placeOCO answers order/placeoco: two working orders, either filling cancels the other. ocoId is
// the other order's id, as the provider's entity reference documents.
func (s *Sim) placeOCO(u *user, sess *session, body []byte, now time.Time) answer {
	var p orderParams
	if a := decodeBody(body, &p); a != nil {
		return *a
	}
	if a := p.checkRequired(); a != nil {
		return *a
	}
	if p.Other == nil {
		return badRequest("No usable value for other")
	}
	a, c, sp, f := s.checkEntry(u, &p, now)
	if f != nil {
		return f.answer()
	}
	os, f := checkBracket(c, p.Other, sp.qty)
	if f != nil {
		return f.answer()
	}
	o1 := s.newOrder(a, c, sp, sess, p.CustomTag50, p.IsAutomated, nil, now)
	o2 := s.newOrder(a, c, os, sess, p.CustomTag50, p.IsAutomated, nil, now)
	s.link(o1, o2)
	s.accept(o1, now)
	if !o2.final() {
		s.accept(o2, now)
	}
	return ok(map[string]any{"orderId": o1.ent.ID, "ocoId": o2.ent.ID})
}

func checkBracket(c *contract, b *bracketParam, qty int64) (spec, *failure) {
	if b.Action != "Buy" && b.Action != "Sell" {
		return spec{}, fail("UnknownReason", "Invalid bracket action %q", b.Action)
	}
	if len(b.Text) > 64 || len(b.ClOrdID) > 64 {
		return spec{}, fail("UnknownReason", "A bracket field is longer than 64 characters")
	}
	sp, f := checkSpec(c, b.Action, b.OrderType, b.TimeInForce, qty, b.Price, b.StopPrice)
	if f != nil {
		return sp, f
	}
	if sp.tif == "Day" && b.TimeInForce == "" {
		sp.tif = "GTC" // a bracket protects a position; the docs name no default
	}
	sp.text, sp.clOrdID = b.Text, b.ClOrdID
	return sp, nil
}

// link makes two orders an OCO pair: each one's linkedId is the other, their ocoId the first's id.
func (s *Sim) link(a, b *order) {
	a.linked, b.linked = b, a
	a.ent.LinkedID, b.ent.LinkedID = b.ent.ID, a.ent.ID
	a.ent.OcoID, b.ent.OcoID = a.ent.ID, a.ent.ID
}
