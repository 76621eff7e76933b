package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestClaimSkipsLockedRuns holds the oldest runnable run's row locked, as a claim or a
// checkpoint of another replica does while it commits, and claims: the claim takes the
// next run at once instead of waiting for the lock.
func TestClaimSkipsLockedRuns(t *testing.T) {
	db, err := Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	thread := bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1"}
	for i, id := range []string{"run-old", "run-new"} {
		err := db.Update(t.Context(), func(tx bot.Tx) error {
			return tx.PutRun(&bot.RunRecord{ID: id, Thread: thread, Status: agent.StatusQueued, CreatedAt: t0.Add(time.Duration(i) * time.Second)})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	other, err := db.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(context.Background())
	if _, err := other.Exec(t.Context(), "SELECT 1 FROM runs WHERE id = 'run-old' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	// A claim that waited for the lock would wait until the rollback above, at the end of
	// the test: the deadline turns that wait into a failure.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	got, err := db.ClaimRuns(ctx, "replica-1", 2, t0, time.Minute)
	if err != nil {
		t.Fatalf("claim while the oldest run is locked: %v", err)
	}
	if len(got) != 1 || got[0].RunID != "run-new" {
		t.Errorf("claimed %+v, want run-new alone", got)
	}
}
