package bot_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// downStore is a replica's view of a database it cannot reach while refuse is set: besides
// the writes a refusingStore refuses, every claim and renewal fails.
type downStore struct {
	refusingStore
}

func (s *downStore) RenewLease(ctx context.Context, l bot.Lease, now time.Time, ttl time.Duration) (bot.Lease, error) {
	if s.refuse.Load() {
		return bot.Lease{}, errRefused
	}
	return s.DB.RenewLease(ctx, l, now, ttl)
}

func (s *downStore) ClaimRuns(ctx context.Context, owner string, n int, now time.Time, ttl time.Duration) ([]bot.Lease, error) {
	if s.refuse.Load() {
		return nil, errRefused
	}
	return s.DB.ClaimRuns(ctx, owner, n, now, ttl)
}

// TestHeldRunTakenOverLeavesNoSaveError holds a run on replica a whose database went away
// as it saved; its lease lapses and replica b takes the run over and completes it. Once a
// reaches the database again and finds its lease taken, it waits for no save of that run:
// its health check (SaveError) no longer reports one.
func TestHeldRunTakenOverLeavesNoSaveError(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		clk := &clock{}
		st := &downStore{refusingStore{DB: db}}
		m := newModel(t)
		var asked atomic.Int32
		m.srv.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
			if asked.Add(1) == 1 {
				st.refuse.Store(true)
			}
			return llmtest.Text("Done in the end.")
		}))
		ag, err := agent.New(agent.Config{}, m.client, nil)
		if err != nil {
			t.Fatal(err)
		}
		logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError + 1}))
		a, err := bot.New(bot.Config{ReplicaID: "a", EditInterval: agent.Duration(time.Second)}, st, ag, []bot.Platform{&recorder{}},
			bot.WithClock(clk.Now), bot.WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer a.Stop(context.Background())
		res, err := a.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "answer me"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if a.SaveError() == nil {
			t.Fatal("no save error while a's database is down")
		}
		newReplica(t, "b", db, clk, m)
		clk.Advance(31 * time.Second)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if rec := runOf(t, db, res.RunID); rec.Status != agent.StatusCompleted {
			t.Fatalf("b left the run %s, want completed", rec.Status)
		}
		st.refuse.Store(false)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if err := a.SaveError(); err != nil {
			t.Errorf("a's SaveError once b took its held run over = %v, want nil", err)
		}
	})
}
