package bot_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// commitFailingStore runs each transaction's function and then fails the commit while fail
// is set, as a disk that fills up under a write does: bbolt rolls everything back.
type commitFailingStore struct {
	*store.DB
	fail atomic.Bool
}

var errCommit = errors.New("commit: write loopbot.db: no space left on device")

func (s *commitFailingStore) Update(ctx context.Context, fn func(tx bot.Tx) error) error {
	return s.DB.Update(ctx, func(tx bot.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if s.fail.Load() {
			return errCommit
		}
		return nil
	})
}

func (s *commitFailingStore) ClaimEvent(context.Context, string, time.Time, time.Duration) (bool, error) {
	panic("a goal must be claimed in the transaction that stores its run")
}

// TestGoalWhoseRunTheStoreRefusedStartsOnRetry fails the commit of the transaction that takes
// a goal: the delivery must not count as seen, so the platform's retry starts the run, once.
func TestGoalWhoseRunTheStoreRefusedStartsOnRetry(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := &commitFailingStore{DB: db}
	ag, err := agent.New(agent.Config{}, newModel(t).client, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(bot.Config{}, st, ag, []bot.Platform{&recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	ev := bot.Event{ID: "Ev1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "do it"}

	st.fail.Store(true)
	if _, err := b.Handle(t.Context(), ev); !errors.Is(err, errCommit) {
		t.Fatalf("Handle with the commit failing = %v, want the store's error", err)
	}
	st.fail.Store(false)
	res, err := b.Handle(t.Context(), ev)
	if err != nil || res.Duplicate || res.RunID == "" {
		t.Fatalf("the retry = %+v, %v; want a new run", res, err)
	}
	again, err := b.Handle(t.Context(), ev)
	if err != nil || !again.Duplicate || again.RunID != "" {
		t.Fatalf("a second retry = %+v, %v; want a duplicate", again, err)
	}
	var runs []*bot.RunRecord
	if err := db.View(t.Context(), func(tx bot.Tx) error {
		runs, err = tx.Runs(bot.RunFilter{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != res.RunID {
		t.Errorf("stored runs %+v, want exactly the retry's run %s", runs, res.RunID)
	}
}

// TestRunWhoseSaveFailsResumesOnceTheStoreTakesWrites fails the store's writes as a run's
// step is saved, as a full disk does: the run is neither failed nor retried while writes fail
// (each retry would cost a model call), and it resumes from its last saved step on its own
// once the store takes writes again.
func TestRunWhoseSaveFailsResumesOnceTheStoreTakesWrites(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db, st, b, asked := startRefusingBot(t, nil)
		res := mention(t, b, "ev-1", thread, "answer me")
		status := func() agent.Status { return readStatus(t, db, res.RunID) }
		time.Sleep(time.Minute)
		synctest.Wait()
		if got, n := status(), asked.Load(); (got != agent.StatusQueued && got != agent.StatusRunning) || n != 1 {
			t.Fatalf("a minute into the refused writes the run is %s after %d model calls, want it as last saved (queued or running) after 1", got, n)
		}
		// The health check's view: a run waits to be saved, and why.
		if err := b.SaveError(); !errors.Is(err, errRefused) {
			t.Errorf("SaveError while the run's save is refused = %v, want the store's refusal", err)
		}
		st.refuse.Store(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got, n := status(), asked.Load(); got != agent.StatusCompleted || n != 2 {
			t.Errorf("once the store took writes the run is %s after %d model calls, want completed after 2", got, n)
		}
		if err := b.SaveError(); err != nil {
			t.Errorf("SaveError once the run was saved = %v, want nil", err)
		}
	})
}

// TestSaveErrorEndsWhenTheRunIsSavedAgain: the health check's SaveError clears as soon as a
// held run's next checkpoint goes through, while the run still works (its next model request
// is waiting), not only once the run ends.
func TestSaveErrorEndsWhenTheRunIsSavedAgain(t *testing.T) {
	bubble(t, func(t *testing.T) {
		release := make(chan struct{})
		_, st, b, asked := startRefusingBot(t, func(n int32) llmtest.Step {
			switch n {
			case 2: // the resumed run's step, whose checkpoint goes through
				return use("read_output", `{"call_id":"none"}`)
			case 3:
				<-release
			}
			return llmtest.Text("Done in the end.")
		})
		defer close(release)
		if _, err := b.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "answer me"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := b.SaveError(); !errors.Is(err, errRefused) {
			t.Fatalf("SaveError while the run's save is refused = %v, want the store's refusal", err)
		}
		st.refuse.Store(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := asked.Load(); n != 3 {
			t.Fatalf("%d model requests, want the resumed run's third one waiting", n)
		}
		if err := b.SaveError(); err != nil {
			t.Errorf("SaveError once the resumed run was saved, while it works = %v, want nil", err)
		}
	})
}

// TestSaveErrorEndsWithTheRun: a held run cancelled before it was saved again leaves no
// SaveError behind once the loop finds it ended.
func TestSaveErrorEndsWithTheRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db, st, b, _ := startRefusingBot(t, nil)
		res := mention(t, b, "ev-1", thread, "answer me")
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := b.SaveError(); !errors.Is(err, errRefused) {
			t.Fatalf("SaveError while the run's save is refused = %v, want the store's refusal", err)
		}
		st.refuse.Store(false)
		if _, err := b.Handle(context.Background(), bot.Event{ID: "ev-2", Kind: bot.EventReply, Thread: thread, User: ann, Text: "stop"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if rec := runOf(t, db, res.RunID); rec.Status != agent.StatusCancelled {
			t.Fatalf("run is %s, want cancelled", rec.Status)
		}
		if err := b.SaveError(); err != nil {
			t.Errorf("SaveError once the held run was cancelled = %v, want nil", err)
		}
	})
}

func TestRetryDelay(t *testing.T) {
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{
		{1, 10 * time.Second}, {3, 10 * time.Second}, {4, 20 * time.Second}, {5, 40 * time.Second},
		{8, 5 * time.Minute}, {100, 5 * time.Minute},
	} {
		if got := bot.RetryDelay(tc.failures); got != tc.want {
			t.Errorf("retryDelay(%d) = %s, want %s", tc.failures, got, tc.want)
		}
	}
}
