package store

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// BenchmarkAcceptBatch is the commit that makes a burst's envelopes durable before their
// acks (bot.Bot.Accept): 100 inbox entries in one transaction, into a store just created
// (the first commit, which grows the file) and into one already holding a few thousand.
func BenchmarkAcceptBatch(b *testing.B) {
	const batch = 100
	entries := func(round int) []*bot.InboxEntry {
		es := make([]*bot.InboxEntry, batch)
		for i := range es {
			id := fmt.Sprintf("Ev%d-%d", round, i)
			es[i] = &bot.InboxEntry{Seq: int64(round*batch + i), Event: bot.Event{Kind: bot.EventMention, ID: id,
				Thread: bot.ThreadRef{Platform: "slack", Workspace: "T1", Channel: "C" + id, Thread: "1700000000.000100"},
				User:   bot.User{ID: "U1"}, Text: "check the build", At: time.Unix(1700000000, 0)}}
		}
		return es
	}
	accept := func(b *testing.B, db *DB, es []*bot.InboxEntry) {
		err := db.UpdateFirst(b.Context(), func(tx bot.Tx) error {
			for _, e := range es {
				if _, err := tx.AddInbox(e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Run("fresh", func(b *testing.B) {
		dir := b.TempDir()
		es := entries(0)
		n := 0
		for b.Loop() {
			b.StopTimer()
			n++
			db, err := Open(filepath.Join(dir, fmt.Sprintf("%d.db", n)))
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			accept(b, db, es)
			b.StopTimer()
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("warm", func(b *testing.B) {
		db, err := Open(filepath.Join(b.TempDir(), "loopbot.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		for r := range 30 {
			accept(b, db, entries(r))
		}
		r := 30
		for b.Loop() {
			r++
			accept(b, db, entries(r))
		}
	})
}
