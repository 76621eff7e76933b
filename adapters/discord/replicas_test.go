package discord

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
	"github.com/loopbot/loopbot/store/storetest"
)

// TestGatewayHeldByOneReplica runs two replicas (bots with their own IDs on one store) with
// an adapter each in gateway mode: only the leader of the gateway's role connects, so a
// message is received once, and the other connects once the leader stops.
func TestGatewayHeldByOneReplica(t *testing.T) {
	f := NewFakeDiscord(t)
	db := openReplicasStore(t)
	start := replicaStarter(t, f)

	stopA := start("a", db)
	if k := f.WaitHandshake(t); k != "identify" {
		t.Fatalf("a's handshake %q, want identify", k)
	}
	f.WaitHeartbeat(t)
	start("b", db)
	// b asks for the role as it starts and again every second; two of its turns pass.
	time.Sleep(2500 * time.Millisecond)
	if n := f.Connections(); n != 1 {
		t.Fatalf("%d gateway connections with two replicas, want 1 (the leader's)", n)
	}

	stopA()
	if k := f.WaitHandshake(t); k == "" {
		t.Fatal("b did not connect after a stopped")
	}
	f.WaitHeartbeat(t)
	if n := f.Connections(); n != 1 {
		t.Errorf("%d gateway connections after a stopped, want 1 (b's)", n)
	}
}

// TestGatewayTakenBack cuts the leader a off from the store: it drops the gateway before its
// leadership expires, b connects, and once a is back and b stops, a connects again with the
// same adapter.
func TestGatewayTakenBack(t *testing.T) {
	f := NewFakeDiscord(t)
	db := openReplicasStore(t)
	start := replicaStarter(t, f)
	cut := &storetest.Cut{Replicated: db}
	start("a", cut)
	if k := f.WaitHandshake(t); k != "identify" {
		t.Fatalf("a's handshake %q, want identify", k)
	}
	f.WaitHeartbeat(t)
	stopB := start("b", db)
	cut.Set(true)
	if k := f.WaitHandshake(t); k != "identify" {
		t.Fatalf("b's handshake %q, want identify", k)
	}
	f.WaitHeartbeat(t)
	if n := f.Connections(); n != 1 {
		t.Errorf("%d gateway connections once b took over, want 1", n)
	}
	cut.Set(false)
	stopB()
	if k := f.WaitHandshake(t); k != "identify" {
		t.Fatalf("a's handshake when it leads again %q, want identify (a new session)", k)
	}
	f.WaitHeartbeat(t)
	if n := f.Connections(); n != 1 {
		t.Errorf("%d gateway connections once a is back, want 1", n)
	}
}

// replicaStarter returns a function that starts a replica named id on the store, with an
// adapter in gateway mode against f; the function it returns stops both.
func replicaStarter(t *testing.T, f *FakeDiscord) func(id string, st bot.Store) (stop func()) {
	srv := llmtest.NewTest(t)
	return func(id string, st bot.Store) (stop func()) {
		t.Helper()
		log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})).With("replica", id)
		a, err := New(testConfig(f), WithClock(f.Now), WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		model, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		ag, err := agent.New(agent.Config{}, model, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The shortest lease: a replica that does not lead asks again every second.
		cfg := bot.Config{ReplicaID: id, LeaseTTL: agent.Duration(3 * time.Second)}
		b, err := bot.New(cfg, st, ag, []bot.Platform{a}, bot.WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx, b) }()
		var stopped bool
		stop = func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("adapter %s: %v", id, err)
			}
			if err := b.Stop(context.Background()); err != nil {
				t.Errorf("stop bot %s: %v", id, err)
			}
		}
		t.Cleanup(stop)
		return stop
	}

}

// openReplicasStore opens the store the replicas of a test share.
func openReplicasStore(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "loopbot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
