package frames_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svc/engine/events"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/frames"
	"github.com/svc/engine/projections/memory"
	"github.com/svc/engine/projections/postgres"
	"github.com/svc/engine/projections/postgres/pgtest"
)

type noMarks struct{}

func (noMarks) Mark(string) (events.Decimal, bool) { return events.Decimal{}, false }

// commit folds commit seq of account a1 as the core fold would, in one
// Update: the account at revision seq with a balance of seq, a position of
// seq and one more working order, o<seq>.
func commit(ctx context.Context, s projections.Store, seq uint64) error {
	return s.Update(ctx, seq, func(tx projections.Tx) error {
		id := fmt.Sprintf("o%03d", seq)
		o := projections.Order{AccountID: "a1", BrokerOrderID: id, ClientOrderID: "c-" + id, Instrument: "BTC-PERP", Side: "buy",
			OrderType: "limit", Quantity: events.Int(1), TimeInForce: "gtc", State: "working", FilledQuantity: events.Int(0), Seq: seq}
		if err := tx.Put(projections.CollOrder, "a1/"+id, &o); err != nil {
			return err
		}
		if err := tx.Put(projections.CollWorking, "a1/"+projections.SeqKey(seq)+"/"+id, id); err != nil {
			return err
		}
		n := events.Int(int64(seq))
		if err := tx.Put(projections.CollPosition, "a1/BTC-PERP", projections.Position{Instrument: "BTC-PERP", Quantity: n,
			AvgPrice: events.Int(100), Multiplier: events.Int(1)}); err != nil {
			return err
		}
		return tx.Put(projections.CollAccount, "a1", projections.Account{AccountID: "a1", Currency: "USD", Kind: "paper",
			StartingBalance: events.Int(0), Balance: n, Realized: events.Int(0), Commissions: events.Int(0), Revision: seq})
	})
}

// racing is a store under a stream of commits: every read of the account
// document lets the next commit land (or waits 50 ms for it, when the store
// holds it back), as a projector folding between a frame's reads would.
type racing struct {
	projections.Store
	inner projections.Store
	next  *uint64
}

func (r racing) Get(ctx context.Context, coll, key string, v any) (bool, error) {
	ok, err := r.Store.Get(ctx, coll, key, v)
	if coll == projections.CollAccount {
		*r.next++
		done := make(chan error, 1)
		go func(seq uint64) { done <- commit(context.Background(), r.inner, seq) }(*r.next)
		select {
		case err := <-done:
			if err != nil {
				return ok, err
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	return ok, err
}

// View passes the inner store's snapshot on, still racing.
func (r racing) View(ctx context.Context, fn func(projections.Store) error) error {
	return projections.View(ctx, r.inner, func(v projections.Store) error {
		return fn(racing{Store: v, inner: r.inner, next: r.next})
	})
}

// A frame is the account as of the one commit its revision names, while
// commits land between its reads: its balance, position and working orders
// are that commit's, never a later one's (issue 47: a frame named 6870
// listed an order of 6872).
func TestFrameIsOneMoment(t *testing.T) {
	stores := map[string]func(t *testing.T) projections.Store{
		"memory": func(*testing.T) projections.Store { return memory.New() },
		"postgres": func(t *testing.T) projections.Store {
			s, err := postgres.Open(context.Background(), pgtest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			next := uint64(1)
			if err := commit(ctx, s, next); err != nil {
				t.Fatal(err)
			}
			r := racing{Store: s, inner: s, next: &next}
			for range 5 {
				f, err := frames.Build(ctx, r, "a1", noMarks{})
				if err != nil {
					t.Fatal(err)
				}
				rev := f.Revision
				if f.Summary.Balance.Cmp(events.Int(int64(rev))) != 0 {
					t.Errorf("the frame at revision %d shows the balance %s of another commit", rev, f.Summary.Balance)
				}
				if len(f.Positions) != 1 || f.Positions[0].Quantity.Cmp(events.Int(int64(rev))) != 0 {
					t.Errorf("the frame at revision %d shows the positions %+v of another commit", rev, f.Positions)
				}
				if uint64(len(f.Orders)) != rev || f.Orders[len(f.Orders)-1].BrokerOrderID != fmt.Sprintf("o%03d", rev) {
					var ids []string
					for _, o := range f.Orders {
						ids = append(ids, o.BrokerOrderID)
					}
					t.Errorf("the frame at revision %d lists the working orders %v: those of commits 1..%d expected", rev, ids, rev)
				}
			}
			// The commits held back meanwhile land, and the next frame shows them.
			waitFor(t, func() bool { cp, _ := s.Checkpoint(ctx); return cp == next })
			f, err := frames.Build(ctx, s, "a1", noMarks{})
			if err != nil {
				t.Fatal(err)
			}
			if f.Revision != next || uint64(len(f.Orders)) != next {
				t.Errorf("after the commits landed the frame names %d with %d orders; want %d", f.Revision, len(f.Orders), next)
			}
		})
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the commits held back never landed")
		}
	}
}
