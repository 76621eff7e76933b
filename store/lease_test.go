package store_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// TestCheckFindsBadLeases passes a good lease, then finds the lease of a run that is not
// stored, written beside it.
func TestCheckFindsBadLeases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	err = db.Update(t.Context(), func(tx bot.Tx) error {
		return tx.PutRun(&bot.RunRecord{ID: "run-1", Thread: bot.ThreadRef{Platform: "web", Channel: "c", Thread: "1"}, Status: agent.StatusQueued, CreatedAt: t0})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ClaimRuns(t.Context(), "replica-1", 1, t0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := db.Check(context.Background()); err != nil {
		t.Fatalf("Check with a good lease: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(btx *bolt.Tx) error {
		return btx.Bucket([]byte("run_leases")).Put([]byte("run-9"), []byte(`{"run_id":"run-9","owner":"x","epoch":1}`))
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(context.Background()); err == nil || !strings.Contains(err.Error(), `lease "run-9" names no run`) {
		t.Errorf("Check = %v, want the lease of a missing run", err)
	}
}
