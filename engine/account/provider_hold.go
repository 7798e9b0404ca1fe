package account

import (
	"strings"

	providercmd "github.com/svc/engine/commands/provider"
	evacct "github.com/svc/engine/events/account"
)

// HeldByReconciliation is the By of a reconciliation hold the engine's own
// reconciliation placed (an operator's carries the operator's address).
const HeldByReconciliation = "reconciliation"

// CauseLink is the Cause of the snapshot read at linking: the first
// reconciliation, the baseline nothing in the log can contradict.
const CauseLink = "link"

// unexplained lists what a complete observation contradicts in the log,
// after the observer folded its orders (every order the provider reports
// working, and every order of the log the reactor looked up by its client
// order id): an order the book holds as working that the provider neither
// has nor reports ended, and a position whose quantity differs from what
// the recorded fills give. Balances are not judged: money moves at a
// provider without an order (transfers, funding, fees), and the wallet it
// reports is recorded as observed. Each entry is a fixed-word sentence
// naming the instrument or order; no provider text.
func (o *observer) unexplained(c *providercmd.Observe) []string {
	st := o.state()
	reported := map[string]bool{}
	for _, ob := range c.Orders {
		reported[ob.ProviderClientOrderID] = true
	}
	var out []string
	for _, id := range sortedKeys(st.Working) {
		if pc := providerID(st, id); pc == "" || !reported[pc] {
			out = append(out, "order "+id+" is working in the log and unknown at the provider")
		}
	}
	at := map[string]evacct.Position{}
	for _, p := range c.Positions {
		at[p.Instrument] = p
	}
	seen := map[string]bool{}
	for _, inst := range append(sortedKeys(st.Positions), sortedKeys(at)...) {
		if seen[inst] {
			continue
		}
		seen[inst] = true
		logged, reportedQty := st.Positions[inst].Quantity, at[inst].Quantity
		if logged.Cmp(reportedQty) != 0 {
			out = append(out, "position "+inst+" is "+reportedQty.String()+" at the provider and "+logged.String()+" by the recorded fills")
		}
	}
	return out
}

// settleMissing takes the orders the log holds as working and the provider
// does not out of the book (the provider's book is the truth), so a
// released hold stays released.
func (o *observer) settleMissing(c *providercmd.Observe) {
	reported := map[string]bool{}
	for _, ob := range c.Orders {
		reported[ob.ProviderClientOrderID] = true
	}
	st := o.state()
	for _, id := range sortedKeys(st.Working) {
		if pc := providerID(st, id); pc == "" || !reported[pc] {
			o.add(evacct.OrderCanceled{BrokerOrderID: id, Reason: "unreconciled", At: o.env.At})
		}
	}
}

// hold puts the account on reconciliation_hold for what reconciliation
// could not explain, unless a hold is on already. The hold is the firm's
// (ReconciliationHeld): additions, credits, debits and resets are refused
// (423 reconciliation_hold); cancels, closes and reductions stay; only an
// operator releases it.
func (o *observer) hold(why []string) {
	if len(why) == 0 || o.s.Firm.Reconciliation {
		return
	}
	reason := strings.Join(why, "; ")
	if len(reason) > 500 {
		reason = reason[:500]
	}
	o.add(evacct.ReconciliationHeld{Reason: reason, By: HeldByReconciliation, At: o.env.At})
}
