package store_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// BenchmarkClaimRuns claims a burst of 1000 queued runs 32 at a time, as the scheduler does
// when a thousand mentions arrive together: each claim passes over the runs the claims
// before it leased. ns/op is the whole burst.
func BenchmarkClaimRuns(b *testing.B) {
	const runs, batch = 1000, 32
	db := openTest(b, filepath.Join(b.TempDir(), "loopbot.db"))
	t0 := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	err := db.Update(b.Context(), func(tx bot.Tx) error {
		for i := range runs {
			id := fmt.Sprintf("run-%04d", i)
			if err := tx.PutRun(&bot.RunRecord{ID: id, Thread: bot.ThreadRef{Platform: "web", Channel: "c", Thread: id}, Status: agent.StatusQueued, CreatedAt: t0}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	now := t0
	for b.Loop() {
		// Each burst claims at a later time than the leases of the one before expire.
		now = now.Add(time.Hour)
		claimed := 0
		for claimed < runs {
			ls, err := db.ClaimRuns(b.Context(), "replica-a", batch, now, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			claimed += len(ls)
		}
	}
}
