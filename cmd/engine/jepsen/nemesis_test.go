package jepsen

import (
	"strings"
	"testing"
	"time"
)

// The summary counts, per fault kind, the attempts invoked while it held,
// the histories they belong to (a cancel to its order's, through the
// brokerOrderId the place answered) and the anomalies on what they touched.
func TestFaultSummaryAttributes(t *testing.T) {
	s := time.Second
	windows := []Window{{Fault: Fault{Kind: FaultCutPG}, Start: 10 * s, End: 20 * s}}
	ops := []Op{
		{Kind: KindPlace, Account: "PA1", Key: "c1", OrderID: "B1", Call: 1 * s, Return: 2 * s, Outcome: OK},
		{Kind: KindCancel, Account: "PA1", Key: "B1", Call: 11 * s, Return: 12 * s, Outcome: OK},
		{Kind: KindPlace, Account: "PA1", Key: "c2", Call: 12 * s, Return: 16 * s, Outcome: Unknown},
		{Kind: KindBalance, Account: "FA1", Key: "r1", Call: 13 * s, Return: 14 * s, Outcome: OK},
		{Kind: KindRead, Account: "PA1", Revision: 42, Call: 23 * s, Return: 24 * s, Outcome: OK},
		{Kind: KindPlace, Account: "PA1", Key: "c3", Call: 40 * s, Return: 41 * s, Outcome: OK},
	}
	anomalies := []Anomaly{
		{Check: "orders", Account: "PA1", Key: "c2"},
		{Check: "frame", Account: "PA1", Key: "42"},  // a read within 5 s of the heal
		{Check: "orders", Account: "PA1", Key: "c3"}, // long after
	}
	got := FaultSummary(windows, ops, anomalies)
	want := "cut-pg: 1 times, 10s in all; 3 attempts invoked meanwhile (ok 2, dup 0, refused 0, fail 0, unknown 1) in 3 checked histories; 2 anomalies;"
	if !strings.HasPrefix(got, want) {
		t.Fatalf("summary:\n%s\nwant it to begin\n%s", got, want)
	}
}
