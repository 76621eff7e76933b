package bot_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// encodeCounter is a bbolt store that counts the states it was asked to encode.
type encodeCounter struct {
	*store.DB
	encoded atomic.Int32
}

func (s *encodeCounter) EncodeState(st *agent.State) (bot.EncodedState, error) {
	s.encoded.Add(1)
	return s.DB.EncodeState(st)
}

// TestCheckpointEncodesBeforeTheTransaction checks that a run's checkpoints have the store
// encode the state in the run's goroutine, before the transaction, where the store's one
// writer would otherwise encode every run's state one after another.
func TestCheckpointEncodesBeforeTheTransaction(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s := &encodeCounter{DB: db}
		lookRun(t, s, "look twice", use("look", `{"q":"a"}`), use("look", `{"q":"b"}`), say("done"))
		// Three steps, each checkpointed at least once.
		if n := s.encoded.Load(); n < 3 {
			t.Errorf("the store encoded %d states for a run of three steps, want one for every checkpoint", n)
		}
	})
}

// lookRun starts a bot over s with the safe tool "look", whose model answers with steps,
// mentions it with text and waits until the run completes, failing the test otherwise. It
// returns the run's ID; the bot stops with the test.
func lookRun(t *testing.T, s bot.Store, text string, steps ...llmtest.Step) string {
	t.Helper()
	m := newModel(t)
	m.add(steps...)
	ag, err := agent.New(agent.Config{MaxSteps: 10, NoProgressSteps: noProgressOff}, m.client, []agent.Tool{&tool{name: "look", risk: agent.RiskSafe, out: "seen"}})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := bot.New(bot.Config{EditInterval: agent.Duration(time.Second)}, s, ag, []bot.Platform{&recorder{}}, bot.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(context.Background()) })
	res, err := b.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		synctest.Wait()
		if readStatus(t, s, res.RunID).Terminal() {
			break
		}
		time.Sleep(time.Second)
	}
	if got := readStatus(t, s, res.RunID); got != agent.StatusCompleted {
		t.Fatalf("run status %s, want %s", got, agent.StatusCompleted)
	}
	return res.RunID
}

func readStatus(t *testing.T, s bot.Store, id string) agent.Status {
	t.Helper()
	var status agent.Status
	if err := s.View(context.Background(), func(tx bot.Tx) error {
		rec, err := tx.RunHeader(id)
		if err == nil {
			status = rec.Status
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return status
}
