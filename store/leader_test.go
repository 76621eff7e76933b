package store_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// TestOpenReleasesStaleLeases opens a file whose last process held a run lease and the
// outbox's leadership and died without releasing them: one process holds a bbolt file, so
// the new one takes both at once, at the next epoch and term, not after their time.
func TestOpenReleasesStaleLeases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bot.db")
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st := agent.NewState("run-1", "goal", nil, now)
	if err := db.Update(t.Context(), func(tx bot.Tx) error {
		return tx.PutRun(&bot.RunRecord{ID: "run-1", Thread: bot.ThreadRef{Platform: "test", Channel: "C", Thread: "T"}, State: st, CreatedAt: now})
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := db.ClaimRuns(t.Context(), "dead", 1, now, time.Minute); err != nil || len(got) != 1 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	if l, err := db.Lead(t.Context(), "outbox", "dead", now, time.Minute); err != nil || l.Owner != "dead" {
		t.Fatalf("lead = %+v, %v", l, err)
	}
	if err := db.Close(); err != nil { // as a kill -9 leaves it: nothing released
		t.Fatal(err)
	}

	db = openTest(t, path)
	got, err := db.ClaimRuns(t.Context(), "new", 1, now, time.Minute)
	if err != nil || len(got) != 1 || got[0].Epoch != 2 {
		t.Errorf("claim after reopening = %+v, %v; want run-1 at epoch 2", got, err)
	}
	l, err := db.Lead(t.Context(), "outbox", "new", now, time.Minute)
	if err != nil || l.Owner != "new" || l.Term != 2 {
		t.Errorf("lead after reopening = %+v, %v; want new's in term 2", l, err)
	}
}
