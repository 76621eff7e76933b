package postgres

import (
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestServerRestart restarts PostgreSQL under an open store: what was committed is there,
// and the next transactions work on new connections, none of them failing on a connection
// the restart broke.
func TestServerRestart(t *testing.T) {
	c := pgtest.NewCluster(t)
	db, err := Open(t.Context(), c.Database(t), WithMaxConns(4))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	thread := bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1"}
	put := func(id string) error {
		return db.Update(t.Context(), func(tx bot.Tx) error {
			return tx.PutRun(&bot.RunRecord{ID: id, Thread: thread, Status: agent.StatusQueued, CreatedAt: t0})
		})
	}
	// Four connections in the pool, each used, so the restart breaks them all.
	errs := make(chan error, 4)
	for i := range 4 {
		go func() { errs <- put("run-" + string(rune('a'+i))) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if err := put("run-after-" + string(rune('a'+i))); err != nil {
			t.Fatalf("write %d after the restart: %v", i, err)
		}
	}
	var n int
	err = db.View(t.Context(), func(tx bot.Tx) error {
		ids, err := tx.RunIDs(bot.RunFilter{})
		n = len(ids)
		return err
	})
	if err != nil || n != 12 {
		t.Errorf("after the restart: %d runs, %v; want 12", n, err)
	}
	if err := db.WriteError(); err != nil {
		t.Errorf("WriteError after writes that committed: %v", err)
	}
}
