package store_test

import (
	"path/filepath"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// BenchmarkRunReads reads benchRun (ten steps, 48 KB) the three ways the bot does, inside
// one read transaction: its head, as every checkpoint does under the write lock; its brief,
// as a card is rendered; and all of it, as a run goroutine starts.
func BenchmarkRunReads(b *testing.B) {
	db := openTest(b, filepath.Join(b.TempDir(), "loopbot.db"))
	r := benchRun()
	if err := db.Update(b.Context(), func(tx bot.Tx) error { return tx.PutRun(r) }); err != nil {
		b.Fatal(err)
	}
	for _, read := range []struct {
		name string
		get  func(tx bot.Tx) func(string) (*bot.RunRecord, error)
	}{
		{"RunHeader", func(tx bot.Tx) func(string) (*bot.RunRecord, error) { return tx.RunHeader }},
		{"RunBrief", func(tx bot.Tx) func(string) (*bot.RunRecord, error) { return tx.RunBrief }},
		{"Run", func(tx bot.Tx) func(string) (*bot.RunRecord, error) { return tx.Run }},
	} {
		b.Run(read.name, func(b *testing.B) {
			err := db.View(b.Context(), func(tx bot.Tx) error {
				get := read.get(tx)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := get(r.ID); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
