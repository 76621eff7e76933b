package bot_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// countingPlatform answers every call at once and counts them, telling done at the n-th.
type countingPlatform struct {
	calls atomic.Int64
	n     int64
	done  chan struct{}
}

func (p *countingPlatform) Name() string { return "test" }

func (p *countingPlatform) Post(_ context.Context, th bot.ThreadRef, _ bot.Message) (bot.MessageRef, error) {
	n := p.calls.Add(1)
	if n == p.n {
		close(p.done)
	}
	return bot.MessageRef{Thread: th, ID: fmt.Sprintf("m%d", n)}, nil
}

func (p *countingPlatform) Update(_ context.Context, _ bot.MessageRef, _ bot.Message) error {
	if p.calls.Add(1) == p.n {
		close(p.done)
	}
	return nil
}

func (p *countingPlatform) Notify(context.Context, bot.ThreadRef, string, string) error { return nil }

// BenchmarkDispatch is the dispatcher's cost for one outbox item: b.N runs, each in
// a channel of its own, whose status cards wait in the outbox of a bbolt store; the bot
// starts and sends them all (render from the stored run, redaction, the call, settling the
// item) to a platform that answers at once. The time is the bot's, per card.
func BenchmarkDispatch(b *testing.B) {
	db, err := store.Open(filepath.Join(b.TempDir(), "bot.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	created := time.Now().UTC()
	const perTx = 500
	for lo := 0; lo < b.N; lo += perTx {
		if err := db.Update(context.Background(), func(tx bot.Tx) error {
			for i := lo; i < min(lo+perTx, b.N); i++ {
				id := fmt.Sprintf("run-%06d", i)
				th := bot.ThreadRef{Platform: "test", Channel: fmt.Sprintf("C%d", i), Thread: "T1"}
				st := agent.NewState(id, "look around the repository and say what it holds", nil, created)
				// Ended, so that neither the scheduler nor the refresh at start touches it.
				st.Status = agent.StatusCompleted
				rec := &bot.RunRecord{ID: id, Thread: th, Requester: ann, Status: st.Status, State: st, CreatedAt: created, UpdatedAt: created}
				if err := tx.PutRun(rec); err != nil {
					return err
				}
				item := bot.OutboxItem{Key: "card/" + id, Kind: bot.OutboxCard, RunID: id, Thread: th, CreatedAt: created.Add(time.Duration(i))}
				if err := tx.PutOutbox(item); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	plat := &countingPlatform{n: int64(b.N), done: make(chan struct{})}
	ag, err := agent.New(agent.Config{}, newModel(b).client, nil)
	if err != nil {
		b.Fatal(err)
	}
	bt, err := bot.New(bot.Config{}, db, ag, []bot.Platform{plat}, bot.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := bt.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	select {
	case <-plat.done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d cards sent", plat.calls.Load(), b.N)
	}
	b.StopTimer()
	if err := bt.Stop(context.Background()); err != nil {
		b.Fatal(err)
	}
}
