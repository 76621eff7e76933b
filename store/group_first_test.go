package store

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/loopbot/loopbot/bot"
)

// TestUpdateFirstGoesAhead holds one write inside its transaction while a full group of
// writes (maxGroup) queues behind it, and then the writes of UpdateFirst: the firsts are
// committed in the next transaction, ahead of the writes that were waiting before them,
// and in the order they came.
func TestUpdateFirstGoesAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := Open(filepath.Join(t.TempDir(), "loopbot.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		before := lastTxID(t, db)

		var wg sync.WaitGroup
		release := holdWrite(t, db, &wg)

		var mu sync.Mutex
		var ran []string // the writes' IDs in the order their functions ran
		txOf := map[string]int{}
		write := func(id string, update func(fn func(bot.Tx) error) error) {
			wg.Go(func() {
				err := update(func(btx bot.Tx) error {
					mu.Lock()
					ran = append(ran, id)
					txOf[id] = btx.(*tx).btx.ID()
					mu.Unlock()
					return btx.PutAction(&bot.Action{ID: id, Kind: bot.ActionCancel, RunID: "r"})
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		for i := range maxGroup {
			write(fmt.Sprintf("later-%d", i), func(fn func(bot.Tx) error) error { return db.Update(t.Context(), fn) })
		}
		synctest.Wait()
		const firsts = 3
		for i := range firsts {
			write(fmt.Sprintf("first-%d", i), func(fn func(bot.Tx) error) error { return db.UpdateFirst(t.Context(), fn) })
			// One at a time, so that they queue in a known order.
			synctest.Wait()
		}
		release()
		wg.Wait()

		if want := []string{"first-0", "first-1", "first-2"}; !slices.Equal(ran[:firsts], want) {
			t.Errorf("ran %v first, want %v: the firsts ahead of the writes that waited before them", ran[:firsts], want)
		}
		next := txOf["first-0"]
		for id, tx := range txOf {
			if tx < next {
				t.Errorf("%s committed in transaction %d, before the firsts' %d", id, tx, next)
			}
		}
		if got := lastTxID(t, db) - before; got != 3 {
			t.Errorf("%d commits, want 3: the held write, the firsts with as many of the others as fit, the rest", got)
		}
	})
}
