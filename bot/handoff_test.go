package bot_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// TestMentionStartsItsRunWithoutAClaim cuts a replica off from claiming runs: the run a
// mention creates is leased to it by the creating transaction, running from that commit on,
// and it still completes, under that first lease.
func TestMentionStartsItsRunWithoutAClaim(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		m := newModel(t)
		gate := make(chan struct{})
		m.srv.SetFallback(llmtest.Func(func(llmtest.Request) llmtest.Step {
			<-gate
			return say("Done.")
		}))
		a := newReplica(t, "a", db, &clock{}, m)
		a.store.Set(true) // every claim fails from now on
		res := mention(t, a.bot, "ev-1", thread, "do it")
		if rec := runOf(t, db, res.RunID); rec.Status != agent.StatusRunning {
			t.Errorf("the run as its creation committed is %s, want running", rec.Status)
		}
		if l := leaseOf(t, db, res.RunID); l.Owner != "a" || l.Epoch != 1 {
			t.Errorf("the run's lease as its creation committed = %+v, want a's at epoch 1", l)
		}
		close(gate)
		synctest.Wait()
		if rec := runOf(t, db, res.RunID); rec.Status != agent.StatusCompleted {
			t.Errorf("run is %s with claims failing, want completed by the replica that created it", rec.Status)
		}
		if n := len(m.requests()); n != 1 {
			t.Errorf("the model was asked %d times, want once", n)
		}
	})
}

// TestHandedOffRunsKeepToMaxConcurrentRuns has a replica of one slot working on a run: a
// mention in another thread makes a run that waits, queued and unleased, for the slot, and
// starts once the first run ends.
func TestHandedOffRunsKeepToMaxConcurrentRuns(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		m := newModel(t)
		charge := newGateTool("charge")
		m.add(use("charge", `{}`))
		m.srv.SetFallback(llmtest.Func(func(llmtest.Request) llmtest.Step { return say("Done.") }))
		a := newReplicaWith(t, bot.Config{MaxConcurrentRuns: 1}, "a", db, &clock{}, m, charge)
		first := mention(t, a.bot, "ev-1", thread, "charge")
		<-charge.started
		other := thread
		other.Thread = "T2"
		second := mention(t, a.bot, "ev-2", other, "look")
		synctest.Wait()
		if rec := runOf(t, db, second.RunID); rec.Status != agent.StatusQueued {
			t.Errorf("a run made while the only slot is taken is %s, want queued", rec.Status)
		}
		if l, err := db.Lease(context.Background(), second.RunID); !errors.Is(err, bot.ErrNotFound) {
			t.Errorf("its lease = %+v, %v; want none", l, err)
		}
		close(charge.release)
		synctest.Wait()
		for _, id := range []string{first.RunID, second.RunID} {
			if rec := runOf(t, db, id); rec.Status != agent.StatusCompleted {
				t.Errorf("run %s is %s, want completed", id, rec.Status)
			}
		}
	})
}

// panickyStore panics in the transaction function of a write whose context carries
// panicHere, and in no other.
type panickyStore struct{ *store.DB }

type panicHere struct{}

func (s *panickyStore) Update(ctx context.Context, fn func(tx bot.Tx) error) error {
	return s.DB.Update(ctx, func(tx bot.Tx) error {
		if ctx.Value(panicHere{}) != nil {
			panic("a transaction's function panicked")
		}
		return fn(tx)
	})
}

// TestHandoffSlotSurvivesAPanic: a mention whose transaction panicked gives back the slot it
// kept, so the next mention's run on a bot of one slot still starts as it is created.
func TestHandoffSlotSurvivesAPanic(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"))
	if err != nil {
		t.Fatal(err)
	}
	st := &panickyStore{DB: db}
	m := newModel(t)
	gate := make(chan struct{})
	m.srv.SetFallback(llmtest.Func(func(llmtest.Request) llmtest.Step {
		<-gate
		return say("Done.")
	}))
	defer close(gate)
	b := startBotOnWith(t, bot.Config{MaxConcurrentRuns: 1}, db, st, m)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Handle did not panic")
			}
		}()
		_, _ = b.Handle(context.WithValue(context.Background(), panicHere{}, true), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "do it"})
	}()
	other := thread
	other.Thread = "T2"
	res := mention(t, b, "ev-2", other, "do it")
	if rec := runOf(t, db, res.RunID); rec.Status != agent.StatusRunning {
		t.Errorf("the run after a panicked one is %s as its creation committed, want running on the bot's one slot", rec.Status)
	}
}
