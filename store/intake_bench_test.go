package store

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// BenchmarkAcceptInbox is what the platform waits on before a burst's acks: a batch of 250
// Slack mentions made durable by AcceptInbox, in the intake journal ("journal": one write,
// one fdatasync) or, as before it, in a bbolt transaction ("tx": bbolt's puts, its commit and
// two fdatasyncs). "move" is what the journal leaves for later, off the ack's path: the write
// transaction that moves the batch into the inbox. Run it where the store lives
// (TMPDIR=/dev/shm for tmpfs): the disk's syncs are most of it.
func BenchmarkAcceptInbox(b *testing.B) {
	const batch = 250
	events := func(round int) []bot.Event {
		evs := make([]bot.Event, batch)
		for i := range evs {
			id := fmt.Sprintf("Ev%d-%d", round, i)
			evs[i] = bot.Event{Kind: bot.EventMention, ID: id,
				Thread: bot.ThreadRef{Platform: "slack", Workspace: "T1", Channel: "C" + id, Thread: "1700000000.000100"},
				User:   bot.User{ID: "U1"}, Text: "check the build", At: time.Unix(1700000000, 0)}
		}
		return evs
	}
	open := func(b *testing.B, journal bool) *DB {
		path := filepath.Join(b.TempDir(), "loopbot.db")
		if !journal {
			db, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			return db
		}
		db, err := Open(path, WithIntake())
		if err != nil {
			b.Fatal(err)
		}
		<-db.intake.made
		if db.intake.f == nil {
			b.Fatal(db.intake.err)
		}
		return db
	}
	move := func(b *testing.B, db *DB) {
		if err := db.Update(b.Context(), func(tx bot.Tx) error { return tx.DeleteInbox("none") }); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		journal bool
	}{{"journal", true}, {"tx", false}} {
		b.Run(tc.name, func(b *testing.B) {
			db := open(b, tc.journal)
			defer db.Close()
			r := 0
			for b.Loop() {
				r++
				if _, err := db.AcceptInbox(b.Context(), "", int64(r*batch), events(r)); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				move(b, db)
				b.StartTimer()
			}
		})
	}
	b.Run("move", func(b *testing.B) {
		db := open(b, true)
		defer db.Close()
		r := 0
		for b.Loop() {
			r++
			b.StopTimer()
			if _, err := db.AcceptInbox(b.Context(), "", int64(r*batch), events(r)); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			move(b, db)
		}
	})
}
