package bot_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// runReads is a store that counts the reads of runs its transactions make.
type runReads struct {
	*store.DB
	mu                  sync.Mutex
	heads, briefs, full int
}

type runReadsTx struct {
	bot.Tx
	s *runReads
}

func (s *runReads) View(ctx context.Context, fn func(tx bot.Tx) error) error {
	return s.DB.View(ctx, func(tx bot.Tx) error { return fn(runReadsTx{Tx: tx, s: s}) })
}

func (s *runReads) Update(ctx context.Context, fn func(tx bot.Tx) error) error {
	return s.DB.Update(ctx, func(tx bot.Tx) error { return fn(runReadsTx{Tx: tx, s: s}) })
}

func (s *runReads) count(n *int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*n++
}

func (tx runReadsTx) RunHeader(id string) (*bot.RunRecord, error) {
	tx.s.count(&tx.s.heads)
	return tx.Tx.RunHeader(id)
}

func (tx runReadsTx) RunBrief(id string) (*bot.RunRecord, error) {
	tx.s.count(&tx.s.briefs)
	return tx.Tx.RunBrief(id)
}

func (tx runReadsTx) Run(id string) (*bot.RunRecord, error) {
	tx.s.count(&tx.s.full)
	return tx.Tx.Run(id)
}

// OutboxHolds passes the store's own check through the wrapper.
func (tx runReadsTx) OutboxHolds(it bot.OutboxItem) (bool, error) {
	return tx.Tx.(bot.OutboxHolder).OutboxHolds(it)
}

// TestSendingACardReadsItsRunOnce edits a status card posted before: the card is rendered
// from one read of the run, which carries the card's reference too, and settling the edit
// reads the run no more.
func TestSendingACardReadsItsRunOnce(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		th := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}
		created := time.Now().UTC()
		if err := db.Update(context.Background(), func(tx bot.Tx) error {
			st := agent.NewState("run-1", "say hello", nil, created)
			st.Status = agent.StatusCompleted
			if err := tx.PutRun(&bot.RunRecord{ID: "run-1", Thread: th, Requester: ann, Status: st.Status, State: st,
				Card: bot.MessageRef{Thread: th, ID: "m7"}, CreatedAt: created, UpdatedAt: created}); err != nil {
				return err
			}
			return tx.PutOutbox(bot.OutboxItem{Key: "card/run-1", Kind: bot.OutboxCard, RunID: "run-1", Thread: th, CreatedAt: created})
		}); err != nil {
			t.Fatal(err)
		}
		s := &runReads{DB: db}
		plat := &recorder{}
		b := startOutboxBot(t, s, bot.Config{}, plat)
		if err := b.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		calls := plat.sent("")
		if len(calls) != 1 || calls[0].kind != "update" || calls[0].ref.ID != "m7" {
			t.Fatalf("calls %+v, want one update of m7", calls)
		}
		if s.heads != 0 || s.briefs != 1 || s.full != 0 {
			t.Errorf("the run was read %d times whole, %d as a brief and %d as a head, want once as a brief", s.full, s.briefs, s.heads)
		}
	})
}
