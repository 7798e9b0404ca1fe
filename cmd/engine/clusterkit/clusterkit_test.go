package clusterkit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/cmd/engine/clusterkit"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/eventlog"
)

// An R3 stream on the three servers keeps taking messages when its leader is
// killed; the killed server, started again, catches up; and a stopped
// follower does not stop the stream either.
func TestR3StreamSurvivesItsLeaderKilled(t *testing.T) {
	began := time.Now()
	n := clusterkit.StartNATS(t, t.TempDir())
	t.Logf("cluster ready in %v", time.Since(began).Round(time.Millisecond))

	js := connect(t, n.URLs())
	const stream = "CK"
	// The meta leader may count a peer offline for a moment even after the
	// placement probe (StartNATS): under the suite's load a create 1 s after
	// it met "no suitable peers for placement, peer offline". The engine's
	// own create asks again on such an answer (eventlog.RetryTimeouts).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := eventlog.CreateStream(ctx, js, jetstream.StreamConfig{Name: stream, Subjects: []string{"ck.>"}, Replicas: 3, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if err := publish(js, "1"); err != nil {
		t.Fatal(err)
	}

	leader := n.StreamLeader(t, stream)
	killed := time.Now()
	n.Kill(leader)
	// The followers elect a new leader 4-9 s after the last heartbeat (the
	// raft election timeout of nats-server; not configurable).
	enginetest.WaitFor(t, 15*time.Second, func() error { return publish(js, "2") })
	t.Logf("leader %s killed: a publish succeeded again after %v", n.Name(leader), time.Since(killed).Round(time.Millisecond))
	next := n.StreamLeader(t, stream)
	if next == leader {
		t.Fatalf("the killed server %s still leads %s", n.Name(leader), stream)
	}

	n.Start(leader)
	waitCurrent(t, js, stream, 2)

	// A stopped server keeps its clients' connections open and answers
	// nothing on them, so this publish goes through the leader itself.
	third := 3 - leader - next
	n.Stop(third)
	viaLeader := connect(t, n.URL(next))
	enginetest.WaitFor(t, 5*time.Second, func() error { return publish(viaLeader, "3") })
	n.Cont(third)
	waitCurrent(t, js, stream, 3)
	t.Logf("done in %v", time.Since(began).Round(time.Millisecond))
}

// connect is a JetStream client of urls, closed when the test ends.
func connect(t *testing.T, urls string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// publish sends one message with id as its Nats-Msg-Id, so a retry of a
// publish whose ack was lost is stored once.
func publish(js jetstream.JetStream, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := js.Publish(ctx, "ck.a", []byte(id), jetstream.WithMsgID(id))
	return err
}

// waitCurrent waits until stream holds msgs messages and both of its
// followers are current.
func waitCurrent(t *testing.T, js jetstream.JetStream, stream string, msgs uint64) {
	t.Helper()
	enginetest.WaitFor(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		info := s.CachedInfo()
		if info.State.Msgs != msgs {
			return fmt.Errorf("%d messages, want %d", info.State.Msgs, msgs)
		}
		if len(info.Cluster.Replicas) != 2 {
			return fmt.Errorf("%d followers, want 2", len(info.Cluster.Replicas))
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return fmt.Errorf("follower %s is not current", r.Name)
			}
		}
		return nil
	})
}
