package account_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evidem "github.com/svc/engine/events/idem"
)

// grow folds n orders, balance operations and keyed writes into s, numbered from k.
func grow(s *account.State, k, n int) *account.State {
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for i := k; i < k+n; i++ {
		s = account.Apply(s, evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: fmt.Sprintf("ord_%d", i),
			ClientOrderID: fmt.Sprintf("c-%d", i), Instrument: "BTC-PERP", Side: "buy", OrderType: "limit",
			Quantity: events.Int(1), TimeInForce: "gtc", CreatedAt: at}})
		s = account.Apply(s, evacct.BalanceChanged{ReferenceID: fmt.Sprintf("ref-%d", i), Op: "deposit",
			Amount: events.Int(1), Balance: events.Int(int64(i)), Digest: fmt.Sprintf("d%d", i), At: at})
		s = account.Apply(s, evidem.KeyUsed{Key: fmt.Sprintf("k-%d", i), Digest: "x", Status: 201, Body: []byte(`{}`), At: at})
	}
	return s
}

// A snapshot's head holds none of the account's history: the mailbox is
// held for the state's current part only. Its tail is the history as it
// stood when the snapshot was taken, however much Apply adds while the tail
// is encoded elsewhere (the race detector checks that the two never touch
// the same memory), and head and tail read back the whole state.
func TestASnapshotTakesTheHistoryOutsideTheMailbox(t *testing.T) {
	s := grow(account.New("acct_1"), 0, 300)
	head, tail := s.SnapshotParts()
	hb, err := json.Marshal(head)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(hb, &fields); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ClientOrderIDs", "References", "Idem"} {
		if string(fields[f]) != "null" {
			t.Fatalf("the head holds the history's %s: %.200s", f, fields[f])
		}
	}
	want := grow(account.New("acct_1"), 0, 300) // the state as of the snapshot
	var tb []byte
	var wg sync.WaitGroup
	wg.Go(func() { tb, err = json.Marshal(tail) }) // outside the mailbox
	s = grow(s, 300, 2000)                         // the mailbox goes on meanwhile
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	got := new(account.State)
	if err := json.Unmarshal(hb, got); err != nil {
		t.Fatal(err)
	}
	if err := got.JoinSnapshot(tb); err != nil {
		t.Fatal(err)
	}
	if d := enginetest.Diff(want, got); len(d) > 0 {
		t.Fatalf("head and tail read back differ from the state at the snapshot:\n%s", strings.Join(d, "\n"))
	}
	if _, used := got.ClientOrderIDs["c-300"]; used || len(got.ClientOrderIDs) != 300 || len(s.ClientOrderIDs) != 2300 {
		t.Fatalf("the tail holds %d clientOrderIds, want the 300 of the snapshot", len(got.ClientOrderIDs))
	}
	// Read back, the state goes on as the original: an order after it is
	// still refused as a reuse, and a new one adds to the history.
	got = grow(got, 300, 1)
	if len(got.History.Orders) != 301 || got.ClientOrderIDs["c-0"] != "ord_0" {
		t.Fatalf("the state read back does not go on: %d orders in its history", len(got.History.Orders))
	}
}

// A state whose maps hold entries its history lacks (written other than by
// Apply) is snapshotted whole in the head: slower, never incomplete.
func TestASnapshotOfMapsBeyondTheHistoryKeepsThemWhole(t *testing.T) {
	s := grow(account.New("acct_1"), 0, 3)
	s.ClientOrderIDs["written-directly"] = "ord_x"
	head, tail := s.SnapshotParts()
	hb, _ := json.Marshal(head)
	tb, _ := json.Marshal(tail)
	got := new(account.State)
	if err := json.Unmarshal(hb, got); err != nil {
		t.Fatal(err)
	}
	if err := got.JoinSnapshot(tb); err != nil {
		t.Fatal(err)
	}
	if got.ClientOrderIDs["written-directly"] != "ord_x" || len(got.ClientOrderIDs) != 4 || len(got.Idem) != 3 {
		t.Fatalf("read back: %v", got.ClientOrderIDs)
	}
}
