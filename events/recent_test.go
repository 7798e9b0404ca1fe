package events_test

import (
	"fmt"
	"testing"

	"github.com/svc/engine/events"
)

func TestRecentHandsOffOnceAndForgetsTheOldest(t *testing.T) {
	r := events.NewRecent(3)
	for i := 1; i <= 4; i++ {
		r.Put(events.Commit{CommandID: fmt.Sprint("c", i)})
	}
	if _, ok := r.Take("c1"); ok {
		t.Fatal("the oldest commit should have been evicted")
	}
	if c, ok := r.Take("c4"); !ok || c.CommandID != "c4" {
		t.Fatalf("take c4: %v %v", c, ok)
	}
	if _, ok := r.Take("c4"); ok {
		t.Fatal("a commit is handed off once")
	}
	r.Drop("c3")
	if _, ok := r.Take("c3"); ok {
		t.Fatal("a dropped commit is not handed off")
	}
	var nilRecent *events.Recent
	nilRecent.Put(events.Commit{CommandID: "x"})
	if _, ok := nilRecent.Take("x"); ok {
		t.Fatal("a nil hand-off holds nothing")
	}
}

func TestRecentKeepsACommitPutAgainWhenItsOlderSlotIsEvicted(t *testing.T) {
	r := events.NewRecent(2)
	r.Put(events.Commit{CommandID: "a", Key: "first"})
	r.Drop("a") // a conflict: the mailbox decides again and puts it again
	r.Put(events.Commit{CommandID: "a", Key: "again"})
	r.Put(events.Commit{CommandID: "b"}) // evicts the first slot
	if c, ok := r.Take("a"); !ok || c.Key != "again" {
		t.Fatalf("take a: %+v %v", c, ok)
	}
	r.Put(events.Commit{CommandID: "a", Key: "first"})
	r.Put(events.Commit{CommandID: "a", Key: "again"}) // put twice without a drop
	r.Put(events.Commit{CommandID: "c"})               // evicts the first of them
	if c, ok := r.Take("a"); !ok || c.Key != "again" {
		t.Fatalf("take a after its older slot was evicted: %+v %v", c, ok)
	}
}
