package bot_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// A pause asked through another bot on the same bbolt handle, as a replica of the process
// would, stops the run at its next step boundary, though the bot that works on it reads
// nothing at its boundaries while nobody writes to it.
func TestPauseAskedOnAnotherBotOfTheHandle(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, res := workingRun(t, "migrated")
		pause, ok := h.statusButton("Pause")
		if !ok {
			t.Fatal("the working run's card has no Pause button")
		}
		ag, err := agent.New(agent.Config{MaxSteps: 10}, h.model.client, nil)
		if err != nil {
			t.Fatal(err)
		}
		other, err := bot.New(bot.Config{ReplicaID: "other"}, h.db, ag, []bot.Platform{&recorder{}},
			bot.WithClock(h.clock.Now), bot.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer other.Stop(context.Background())
		got, err := other.Handle(context.Background(), bot.Event{Kind: bot.EventAction, ID: "ev-other", Thread: thread, User: ann, ActionID: pause.ID})
		if err != nil || got.Notice != "Pausing at the next step." {
			t.Fatalf("pause through the other bot: %+v, %v", got, err)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingInput)
		if rec := h.run(res.RunID); rec.State.Pause == nil || rec.State.Pause.Kind != agent.PausePerson {
			t.Fatalf("paused as %+v, want by a person", rec.State.Pause)
		}
		if n := len(h.model.requests()); n != 1 {
			t.Fatalf("%d model requests, want 1: the run went on past the boundary", n)
		}
		synctest.Wait()
	})
}
