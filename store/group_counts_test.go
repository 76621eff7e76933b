package store

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/loopbot/loopbot/bot"
)

// TestWriteCounts counts writes and commits: a write that writes nothing costs no commit,
// and writes queued behind a held one are committed together.
func TestWriteCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := Open(filepath.Join(t.TempDir(), "loopbot.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		writes0, commits0 := db.WriteCounts()
		put := func(id string) func(bot.Tx) error {
			return func(tx bot.Tx) error { return tx.PutAction(&bot.Action{ID: id, Kind: bot.ActionCancel, RunID: "r"}) }
		}
		if err := db.Update(t.Context(), put("alone")); err != nil {
			t.Fatal(err)
		}
		if err := db.Update(t.Context(), func(tx bot.Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		release := holdWrite(t, db, &wg)
		for i := range 3 {
			wg.Go(func() {
				if err := db.Update(t.Context(), put(fmt.Sprint("queued-", i))); err != nil {
					t.Error(err)
				}
			})
		}
		synctest.Wait()
		release()
		wg.Wait()
		writes, commits := db.WriteCounts()
		if got, want := writes-writes0, int64(6); got != want {
			t.Errorf("%d writes counted, want %d", got, want)
		}
		// The lone write, the held one, and the three queued behind it together.
		if got, want := commits-commits0, int64(3); got != want {
			t.Errorf("%d commits counted, want %d", got, want)
		}
	})
}

// holdWrite starts a write, in wg, that stays inside its transaction until release is
// called, and returns once it is there: the writes made meanwhile queue behind it.
func holdWrite(t *testing.T, db *DB, wg *sync.WaitGroup) (release func()) {
	t.Helper()
	entered, held := make(chan struct{}), make(chan struct{})
	wg.Go(func() {
		err := db.Update(t.Context(), func(tx bot.Tx) error {
			close(entered)
			<-held
			return tx.PutAction(&bot.Action{ID: "held", Kind: bot.ActionCancel, RunID: "r"})
		})
		if err != nil {
			t.Error(err)
		}
	})
	<-entered
	return func() { close(held) }
}
