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
