package store

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// TestWriteStats counts writes and commits: a write that writes nothing costs no commit,
// and writes queued behind a held one are committed together. The writes that queued
// waited while the held one was held, and the writer was busy meanwhile.
func TestWriteStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := Open(filepath.Join(t.TempDir(), "loopbot.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		before := db.WriteStats()
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
		const held = time.Minute
		time.Sleep(held) // in the bubble: the clock moves only when everyone waits
		release()
		wg.Wait()
		after := db.WriteStats()
		if got, want := after.Writes-before.Writes, int64(6); got != want {
			t.Errorf("%d writes counted, want %d", got, want)
		}
		// The lone write, the held one, and the three queued behind it together.
		if got, want := after.Commits-before.Commits, int64(3); got != want {
			t.Errorf("%d commits counted, want %d", got, want)
		}
		// The held write and the three behind it each waited the minute; the writer was
		// busy for it running the held one's function.
		if got, want := after.Waited-before.Waited, 4*held; got != want {
			t.Errorf("the writes waited %v, want %v", got, want)
		}
		if got, want := after.Busy-before.Busy, held; got != want {
			t.Errorf("the writer was busy %v, want %v", got, want)
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
