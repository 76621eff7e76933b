package bot_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// TestACardPutAgainDuringItsEditGoesAgainOnlyIfItChanged puts a run's status card again
// while the platform edits it, as a checkpoint during the call does: settling the edit
// leaves the item, which goes again rendered from the newest records. A run that changed
// meanwhile gets a second edit showing its new state; one that did not is settled without
// another call, since the card shows that already.
func TestACardPutAgainDuringItsEditGoesAgainOnlyIfItChanged(t *testing.T) {
	for _, changed := range []bool{false, true} {
		name := "unchanged"
		if changed {
			name = "changed"
		}
		t.Run(name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				db := openStore(t)
				th := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}
				created := time.Now().UTC()
				st := agent.NewState("run-1", "say hello", nil, created)
				st.Status, st.Step = agent.StatusCompleted, 1
				rec := &bot.RunRecord{ID: "run-1", Thread: th, Requester: ann, Status: st.Status, State: st,
					Card: bot.MessageRef{Thread: th, ID: "m1"}, CreatedAt: created, UpdatedAt: created}
				// Each put is stamped anew, as the records stamp them: the bubble's clock
				// stands still during the call.
				puts := 0
				queue := func(tx bot.Tx) error {
					puts++
					return tx.PutOutbox(bot.OutboxItem{Key: "card/run-1", Kind: bot.OutboxCard, RunID: "run-1", Thread: th, CreatedAt: created.Add(time.Duration(puts))})
				}
				if err := db.Update(context.Background(), func(tx bot.Tx) error {
					if err := tx.PutRun(rec); err != nil {
						return err
					}
					return queue(tx)
				}); err != nil {
					t.Fatal(err)
				}
				plat := &recorder{}
				plat.fail = func(o op) error {
					if len(plat.ops) > 0 {
						return nil
					}
					// The first edit is in flight: the run checkpoints meanwhile.
					if err := db.Update(context.Background(), func(tx bot.Tx) error {
						if changed {
							st.Step = 2
							if err := tx.PutRun(rec); err != nil {
								return err
							}
						}
						return queue(tx)
					}); err != nil {
						t.Error(err)
					}
					return nil
				}
				b := startOutboxBot(t, db, bot.Config{}, plat)
				defer b.Stop(context.Background())
				synctest.Wait()
				// The leader looks at the outbox unasked every third of the lease.
				time.Sleep(11 * time.Second)
				synctest.Wait()
				if left := storedOutbox(t, db); len(left) != 0 {
					t.Errorf("%d items left, want none", len(left))
				}
				calls := plat.sent("")
				want := 1
				if changed {
					want = 2
				}
				if len(calls) != want {
					t.Fatalf("%d calls, want %d", len(calls), want)
				}
				if last := calls[len(calls)-1]; last.kind != "update" || !strings.HasPrefix(last.msg.Footer, "Step "+map[bool]string{false: "1", true: "2"}[changed]+" ") {
					t.Errorf("the last call was %s of %q, want an update showing the run's step %d", last.kind, last.msg.Footer, st.Step)
				}
			})
		})
	}
}
