package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// TestNewStoreGrowsOnce: a new store's file grows to initialMmapSize at its first commit
// (Open's, which creates the buckets) and not again while what it holds fits, so that the
// first commits (a burst's intake among them) do not each grow the file, sync it and map
// it again.
func TestNewStoreGrowsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	size := func() int64 {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	// Opening a new file commits its buckets, which grows it.
	if got := size(); got != initialMmapSize {
		t.Fatalf("after Open the file is %d bytes, want %d", got, initialMmapSize)
	}
	for round := range 40 {
		err := db.UpdateFirst(t.Context(), func(tx bot.Tx) error {
			for i := range 100 {
				id := fmt.Sprintf("Ev%d-%d", round, i)
				e := &bot.InboxEntry{Seq: int64(round*100 + i), Event: bot.Event{ID: id, Text: "check the build",
					Thread: bot.ThreadRef{Platform: "slack", Channel: "C" + id, Thread: "1700000000.000100"}}}
				if _, err := tx.AddInbox(e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := size(); got != initialMmapSize {
			t.Fatalf("after commit %d the file is %d bytes, want %d: grown step by step", round+1, got, initialMmapSize)
		}
	}
}
