package account_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/domain/parts"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evidem "github.com/svc/engine/events/idem"
)

// grow folds n orders, each filled with a realized PnL, balance operations
// and keyed writes into s, numbered from k, a minute apart from day 0.
func grow(s *account.State, k, n int) *account.State {
	return growAt(s, k, n, time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC), time.Minute)
}

func growAt(s *account.State, k, n int, from time.Time, step time.Duration) *account.State {
	for i := k; i < k+n; i++ {
		s = account.Fold(s, uint64(i+1), grown(i, from, step))
	}
	return s
}

// grown is the commit growAt folds as order i at sequence i+1: the order,
// its fill, a balance operation and a keyed write.
func grown(i int, from time.Time, step time.Duration) []events.Event {
	at := from.Add(time.Duration(i) * step)
	id := fmt.Sprintf("ord_%d", i)
	return []events.Event{
		evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: id,
			ClientOrderID: fmt.Sprintf("c-%d", i), Instrument: "BTC-PERP", Side: "buy", OrderType: "limit",
			Quantity: events.Int(1), TimeInForce: "gtc", CreatedAt: at}},
		evacct.OrderFilled{BrokerOrderID: id, Done: true, Instrument: "BTC-PERP",
			Quantity: events.Int(1), Price: events.Int(100), Realized: events.Int(int64(i%7) - 3), Balance: events.Int(int64(i)), At: at},
		evacct.BalanceChanged{ReferenceID: fmt.Sprintf("ref-%d", i), Op: "deposit",
			Amount: events.Int(1), Balance: events.Int(int64(i)), Digest: fmt.Sprintf("d%d", i), At: at},
		evidem.KeyUsed{Key: fmt.Sprintf("k-%d", i), Digest: "x", Status: 201, Body: []byte(`{}`), At: at},
	}
}

// grownLog reads grow's commits back (account.Finder).
func grownLog(seq uint64) ([]events.Event, error) {
	return grown(int(seq)-1, time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC), time.Minute), nil
}

// encode encodes a snapshot's head and lists as engine/snapshot does (each
// list here in one part) and reads them back.
func encode(t *testing.T, head any, lists []parts.List) (hb []byte, joined []parts.Joined) {
	t.Helper()
	hb, err := json.Marshal(head)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lists {
		b, err := json.Marshal(l.Items)
		if err != nil {
			t.Fatal(err)
		}
		joined = append(joined, parts.Joined{Name: l.Name, Base: l.Base, Parts: [][]byte{b}})
	}
	return hb, joined
}

func readBack(t *testing.T, hb []byte, joined []parts.Joined) *account.State {
	t.Helper()
	got := new(account.State)
	if err := json.Unmarshal(hb, got); err != nil {
		t.Fatal(err)
	}
	if err := got.JoinSnapshot(joined); err != nil {
		t.Fatal(err)
	}
	return got
}

// A snapshot's head holds none of the account's history and none of its
// realized fills: the mailbox is held for the state's current part only.
// Its lists are the history and the fills as they stood when the snapshot
// was taken, however much Apply adds while they are encoded elsewhere (the
// race detector checks that the two never touch the same memory), and head
// and lists read back the whole state.
func TestASnapshotTakesTheHistoryOutsideTheMailbox(t *testing.T) {
	s := grow(account.New("acct_1"), 0, 300)
	head, lists := s.SnapshotParts()
	hb, err := json.Marshal(head)
	if err != nil {
		t.Fatal(err)
	}
	var fields struct {
		Orders, References, Idem json.RawMessage
		Risk                     struct{ Fills json.RawMessage }
	}
	if err := json.Unmarshal(hb, &fields); err != nil {
		t.Fatal(err)
	}
	if fields.Orders != nil {
		t.Fatalf("the head holds the clientOrderId index: %.200s", fields.Orders)
	}
	for name, f := range map[string]json.RawMessage{"References": fields.References,
		"Idem": fields.Idem, "Risk.Fills": fields.Risk.Fills} {
		if string(f) != "null" {
			t.Fatalf("the head holds the history's %s: %.200s", name, f)
		}
	}
	want := grow(account.New("acct_1"), 0, 300) // the state as of the snapshot
	var joined []parts.Joined
	var wg sync.WaitGroup
	wg.Go(func() { _, joined = encode(t, nil, lists) }) // outside the mailbox
	s = grow(s, 300, 2000)                              // the mailbox goes on meanwhile
	wg.Wait()
	got := readBack(t, hb, joined)
	if d := enginetest.Diff(want, got); len(d) > 0 {
		t.Fatalf("head and lists read back differ from the state at the snapshot:\n%s", strings.Join(d, "\n"))
	}
	got.UseFinder(grownLog)
	if got.OrderID("c-300") != "" || got.Orders.Len() != 300 || s.Orders.Len() != 2300 || len(got.History.Orders) != 0 {
		t.Fatalf("the lists hold %d clientOrderIds (%d whole), want the 300 of the snapshot as keys", got.Orders.Len(), len(got.History.Orders))
	}
	// Read back, the state goes on as the original: an order after it is
	// still refused as a reuse, and a new one adds to the history.
	got = grow(got, 300, 1)
	if len(got.History.OrderKeys) != 301 || got.OrderID("c-0") != "ord_0" || got.OrderID("c-300") != "ord_300" ||
		minutes(&got.Risk) != minutes(&want.Risk)+1 {
		t.Fatalf("the state read back does not go on: %d orders in its history", len(got.History.OrderKeys))
	}
}

// The realized fills are a window: those older than RealizedWindow are
// dropped as new ones come, and FillsFrom counts them, so a snapshot's
// fills list starts at the index of the first it holds among all the
// account ever held; read back, the window and the count are the state's.
func TestASnapshotOfTheFillsWindowKeepsItsIndex(t *testing.T) {
	s := growAt(account.New("acct_1"), 0, 400, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Hour)
	kept := int(account.RealizedWindow / time.Hour)
	realized := 0
	for i := range 400 {
		if i%7 != 3 { // a zero PnL is not kept
			realized++
		}
	}
	if minutes(&s.Risk)+s.Risk.FillsFrom != realized || len(s.Risk.Fills) > kept+1 || s.Risk.FillsFrom == 0 {
		t.Fatalf("%d fills kept from %d, of %d realized over 400 hours", len(s.Risk.Fills), s.Risk.FillsFrom, realized)
	}
	head, lists := s.SnapshotParts()
	hb, joined := encode(t, head, lists)
	got := readBack(t, hb, joined)
	if d := enginetest.Diff(s, got); len(d) > 0 {
		t.Fatalf("read back:\n%s", strings.Join(d, "\n"))
	}
	joined[6].Base++ // fills from another index than the head's
	var st account.State
	if err := json.Unmarshal(hb, &st); err != nil {
		t.Fatal(err)
	}
	if err := st.JoinSnapshot(joined); err == nil {
		t.Fatal("fills from another index than the head's were joined")
	}
}

// A state whose maps hold entries its history lacks (written other than by
// Apply) is snapshotted whole in the head: slower, never incomplete. The
// clientOrderId index, which only Apply writes, stays in its lists.
func TestASnapshotOfMapsBeyondTheHistoryKeepsThemWhole(t *testing.T) {
	s := grow(account.New("acct_1"), 0, 3)
	s.References["written-directly"] = "dx"
	head, lists := s.SnapshotParts()
	if len(lists) != 4 {
		t.Fatalf("lists apart from a head that holds them: %v", lists)
	}
	hb, joined := encode(t, head, lists)
	got := readBack(t, hb, joined)
	got.UseFinder(grownLog)
	if got.References["written-directly"] != "dx" || len(got.References) != 4 || len(got.Idem) != 3 || minutes(&got.Risk) != 3 ||
		got.Orders.Len() != 3 || got.OrderID("c-2") != "ord_2" {
		t.Fatalf("read back: %v, %d clientOrderIds", got.References, got.Orders.Len())
	}
}

// minutes counts the minutes of realized PnL the account keeps.
func minutes(r *account.Risk) int {
	if r.FillsOpen != nil {
		return len(r.Fills) + 1
	}
	return len(r.Fills)
}
