package bot_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
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
