package postgres_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestPauseAskedOnAnotherReplica: a pause asked through replica b stops the run replica a
// works on at its next step boundary. Other processes write a PostgreSQL database, so a's
// loop reads it at every boundary (bot.BoundaryCounter), which a's bot finds on the pool
// itself here, not behind a test wrapper.
func TestPauseAskedOnAnotherReplica(t *testing.T) {
	url := pgtest.URL(t)
	clk := &testClock{}
	tool := &charge{started: make(chan struct{}, 4), release: make(chan struct{})}
	srv := llmtest.New(llmtest.ToolCalls(llmtest.Call("charge", `{"q":"10 EUR"}`)))
	srv.SetFallback(llmtest.Func(func(llmtest.Request) llmtest.Step { return llmtest.Text("Done.") }))
	dbA := openURL(t, url)
	a := startBot(t, "a", dbA, &platform{}, slog.New(slog.NewTextHandler(io.Discard, nil)), clk, srv, 3*time.Second, tool)
	thread := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}
	ann := bot.User{ID: "U1", Name: "ann"}
	res, err := a.Handle(t.Context(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "charge 10 EUR"})
	if err != nil {
		t.Fatal(err)
	}
	<-tool.started

	b := startReplica(t, "b", url, clk, srv, tool)
	pause := storedRun(t, b.db, res.RunID).PauseAction
	got, err := b.bot.Handle(t.Context(), bot.Event{ID: "ev-2", Kind: bot.EventAction, Thread: thread, User: ann, ActionID: pause})
	if err != nil || got.Notice != "Pausing at the next step." {
		t.Fatalf("pause through b: %+v, %v", got, err)
	}
	close(tool.release)
	eventually(t, "the run to stop", func() bool { return storedRun(t, dbA, res.RunID).Status != agent.StatusRunning })
	rec := storedRun(t, dbA, res.RunID)
	if rec.Status != agent.StatusAwaitingInput || rec.State.Pause == nil || rec.State.Pause.Kind != agent.PausePerson {
		t.Fatalf("the run stopped %s, paused as %+v; want paused by a person", rec.Status, rec.State.Pause)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once: the run went on past the boundary", n)
	}
	if n := tool.calls.Load(); n != 1 {
		t.Errorf("charge ran %d times, want once", n)
	}
}
