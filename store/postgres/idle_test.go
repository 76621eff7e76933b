package postgres_test

import (
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestPausedTransactionFreesItsLocks: replica a is paused in the middle of a transaction
// that locked a run's row, as a SIGSTOP or a frozen VM leaves it. Claims skip locked runs,
// so b could not take the run over while a sleeps; the server ends a's idle transaction
// after the timeout, b claims the run, and a, when it wakes, runs its transaction again
// instead of failing it.
func TestPausedTransactionFreesItsLocks(t *testing.T) {
	url := pgtest.URL(t)
	a := openURL(t, url, postgres.WithIdleTransactionTimeout(time.Second))
	b := openURL(t, url)
	thread := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}
	if err := b.Update(t.Context(), func(tx bot.Tx) error {
		return tx.PutRun(&bot.RunRecord{ID: "run-1", Thread: thread, Status: agent.StatusRunning, CreatedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	locked, wake := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(wake) }) }
	t.Cleanup(release) // before the stores close, which wait for a's transaction
	done := make(chan error, 1)
	attempts := 0
	go func() {
		done <- a.Update(t.Context(), func(tx bot.Tx) error {
			attempts++
			rec, err := tx.RunHeader("run-1")
			if err != nil {
				return err
			}
			if attempts == 1 {
				close(locked)
				<-wake // paused
			}
			rec.ReviewsPosted++
			return tx.PutRunHead(rec)
		})
	}()
	<-locked
	claim := func() []bot.Lease {
		got, err := b.ClaimRuns(t.Context(), "b", 1, time.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := claim(); len(got) != 0 {
		t.Fatalf("b claimed %v while a held the run's row", got)
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(claim()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("b could not claim the run 15s after a paused holding its row")
		}
		time.Sleep(50 * time.Millisecond)
	}
	release()
	if err := <-done; err != nil || attempts != 2 {
		t.Fatalf("a's transaction after it woke: %v after %d attempts, want it run again", err, attempts)
	}
}
