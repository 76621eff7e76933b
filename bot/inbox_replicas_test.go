package bot_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// The inbox with replicas (inbox.go, presence.go): the events a replica accepted are its
// own to handle while it lives.

// runsOf lists the runs stored in db, oldest first.
func runsOf(t *testing.T, db *store.DB) []*bot.RunRecord {
	t.Helper()
	var runs []*bot.RunRecord
	if err := db.View(context.Background(), func(tx bot.Tx) error {
		var err error
		runs, err = tx.Runs(bot.RunFilter{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return runs
}

func accept(t *testing.T, r *replica, ev bot.Event) {
	t.Helper()
	added, err := r.bot.Accept(context.Background(), []bot.Event{ev})
	if err != nil || len(added) != 1 || !added[0] {
		t.Fatalf("%s accepts %s: %v, %v", r.id, ev.ID, added, err)
	}
}

// TestInboxOfALiveReplicaIsLeftToIt: a accepted an event and is about to handle it when b
// starts; b's start leaves it to a, so a's handling is the first (its notice reaches the
// person) and not a duplicate.
func TestInboxOfALiveReplicaIsLeftToIt(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		clk := &clock{}
		m := newModel(t)
		m.srv.SetFallback(say("Done."))
		a := newReplica(t, "a", db, clk, m)
		ev := bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "go"}
		accept(t, a, ev)
		newReplica(t, "b", db, clk, m)
		synctest.Wait()
		if runs := runsOf(t, db); len(runs) != 0 {
			t.Fatalf("b's start handled a's accepted event: %d runs", len(runs))
		}
		res := handleOn(t, a, ev)
		if res.Duplicate || res.RunID == "" {
			t.Errorf("a's handling of its own event: %+v, want the first", res)
		}
	})
}

// TestInboxOfAGoneReplicaIsAdopted: a accepted an event and stopped renewing its presence
// (killed, paused) before handling it. Once its presence lapsed, b, leading the outbox,
// adopts the event and handles it, with no replica starting; a's late handling is a
// duplicate. A replica that starts adopts such events at once, too.
func TestInboxOfAGoneReplicaIsAdopted(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		clk := &clock{}
		m := newModel(t)
		m.srv.SetFallback(say("Done."))
		a := newReplica(t, "a", db, clk, m)
		b := newReplica(t, "b", db, clk, m)
		ev := bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "first"}
		accept(t, a, ev)
		a.store.Set(true)
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if runs := runsOf(t, db); len(runs) != 0 {
			t.Fatalf("%d runs before a's presence lapsed, want none", len(runs))
		}
		clk.Advance(31 * time.Second)
		time.Sleep(20 * time.Second) // b's next elections, and its next look at the inbox
		synctest.Wait()
		if runs := runsOf(t, db); len(runs) != 1 || runs[0].State.Goal != "first" {
			t.Fatalf("runs after a's presence lapsed: %d, want b to handle a's event; b's log:\n%s", len(runs), b.log.buf.String())
		}
		if !b.log.has("adopting the events of a gone replica") {
			t.Errorf("b's log does not say it adopted a's events:\n%s", b.log.buf.String())
		}
		if res := handleOn(t, a, ev); !res.Duplicate {
			t.Errorf("a's late handling: %+v, want a duplicate", res)
		}

		// a is still gone; c starts and takes a's next event at once.
		ev2 := bot.Event{ID: "ev-2", Kind: bot.EventMention, Thread: bot.ThreadRef{Platform: thread.Platform, Channel: "C1", Thread: "T2"}, User: ann, Text: "second"}
		accept(t, a, ev2)
		newReplica(t, "c", db, clk, m)
		if runs := runsOf(t, db); len(runs) != 2 || runs[1].State.Goal != "second" {
			t.Fatalf("runs after c started: %d, want c's start to handle a's second event", len(runs))
		}
		synctest.Wait()
		if rec := runsOf(t, db)[1]; rec.Status != agent.StatusCompleted {
			t.Errorf("the adopted run is %s, want completed", rec.Status)
		}
	})
}

// TestInboxOfAnEarlierProcessOfTheSameID: a replica restarted under its fixed ID handles
// at its start what its earlier process accepted and left.
func TestInboxOfAnEarlierProcessOfTheSameID(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		clk := &clock{}
		m := newModel(t)
		m.srv.SetFallback(say("Done."))
		a := newReplica(t, "a", db, clk, m)
		accept(t, a, bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "go"})
		if err := a.bot.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		newReplica(t, "a", db, clk, m)
		if runs := runsOf(t, db); len(runs) != 1 {
			t.Errorf("%d runs after a restarted, want its accepted event handled", len(runs))
		}
	})
}
