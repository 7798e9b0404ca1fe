package stream

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/svc/engine/engine/enginetest"
)

func TestOfferNeverGoesBack(t *testing.T) {
	s := newSub()
	s.offer(Payload{Name: "account", Rev: 6})
	s.offer(Payload{Name: "lock", Rev: 6})
	if got := s.Take(); len(got) != 2 {
		t.Fatalf("took %v", got)
	}
	s.offer(Payload{Name: "account", Rev: 5})
	s.offer(Payload{Name: "lock", Rev: 6, ID: "again"})
	got := s.Take()
	if len(got) != 1 || got[0].Name != "lock" || got[0].ID != "again" {
		t.Fatalf("took %v, want only the lock at the same revision", got)
	}
}

// Payloads sent faster than a pass takes end with every subscriber holding
// the newest, each seeing revisions only go up.
func TestFanoutLeavesEverySubscriberWithTheNewest(t *testing.T) {
	h := NewHub(nil, nil, nil)
	const n, sends = 3000, 50
	subs := make([]*Sub, n)
	h.subs["a"] = map[*Sub]struct{}{}
	for i := range subs {
		subs[i] = newSub()
		h.subs["a"][subs[i]] = struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.fan(ctx)
	seen := make([]uint64, n)
	check := func() error {
		for i, s := range subs {
			for _, p := range s.Take() {
				if p.Rev < seen[i] {
					return fmt.Errorf("subscriber %d: revision %d after %d", i, p.Rev, seen[i])
				}
				seen[i] = p.Rev
			}
		}
		return nil
	}
	for r := uint64(1); r <= sends; r++ {
		h.Send("a", Payload{Name: "account", ID: strconv.FormatUint(r, 10), Rev: r})
		if err := check(); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.WaitFor(t, 10*time.Second, func() error {
		if err := check(); err != nil {
			t.Fatal(err)
		}
		behind := 0
		for _, r := range seen {
			if r != sends {
				behind++
			}
		}
		if behind > 0 {
			return fmt.Errorf("%d subscribers lack the newest payload", behind)
		}
		return nil
	})
}
