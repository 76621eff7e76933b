package bot_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// TestRunHeldByAnOutageResumesAtTheNextPass refuses the store's writes for a moment as a
// run's step is saved, as a database restart does: once writes go through again, the
// scheduler's next pass (here a second mention's) finds it out and resumes the held run at
// once, instead of after the retry timer's ten seconds.
func TestRunHeldByAnOutageResumesAtTheNextPass(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db, st, b, _ := startRefusingBot(t, nil)
		first, err := b.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "answer me"})
		if err != nil {
			t.Fatal(err)
		}
		status := func(id string) agent.Status {
			var rec *bot.RunRecord
			if err := db.View(context.Background(), func(tx bot.Tx) error {
				rec, err = tx.Run(id)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return rec.Status
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := status(first.RunID); got.Terminal() {
			t.Fatalf("the run is %s while the store refused its save, want it held as last saved", got)
		}
		st.refuse.Store(false)
		other := thread
		other.Thread = "T2"
		if _, err := b.Handle(context.Background(), bot.Event{ID: "ev-2", Kind: bot.EventMention, Thread: other, User: ann, Text: "and me"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := status(first.RunID); got != agent.StatusCompleted {
			t.Errorf("a second after the store took writes again (and a pass of the scheduler) the run is %s, want completed", got)
		}
	})
}
