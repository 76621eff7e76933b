package slack

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// pauseNoteTool is a read-only tool that runs without asking.
type pauseNoteTool struct{}

func (pauseNoteTool) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "jot", Description: "notes something",
		Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}, ReadOnly: true, Idempotent: true}
}

func (pauseNoteTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe}
}

func (pauseNoteTool) Call(context.Context, agent.Invocation) (string, error) { return "noted", nil }

// TestE2EPauseAndResumeAcrossARestart: through Socket Mode, the real bot and store, Pause on
// the status card pauses the run at its next step; the card then offers Resume, which works
// after the process is restarted on the same store.
func TestE2EPauseAndResumeAcrossARestart(t *testing.T) {
	e := newE2EWith(t, bot.Config{}, []agent.Tool{pauseNoteTool{}})
	open := e.gate(llmtest.ToolCalls(llmtest.Call("jot", `{}`)))
	e.model.Push(llmtest.Text("All noted."))
	e.mention("env-1", "Ev1", "note things")
	e.handled()
	card := e.log.waitCall(t, "the status card", 1, "chat.postMessage", statusCard)
	e.click("env-p", "trig-p", "U1", "ann", card.TS, buttonValue(t, card, "Pause"))
	if h := e.handled(); h.res.Notice != "Pausing at the next step." {
		t.Fatalf("pause: %+v", h.res)
	}
	open()
	paused := e.log.waitCall(t, "the card offering Resume", 1, "chat.update", and(at(card.TS), blocksHave(`"Resume"`)))
	resume := buttonValue(t, paused, "Resume")

	e.stop()
	e.start()
	e.view(func(tx bot.Tx) error {
		runs, err := tx.Runs(bot.RunFilter{})
		if len(runs) != 1 || runs[0].Status != agent.StatusAwaitingInput || runs[0].State.Pause.Kind != agent.PausePerson {
			t.Errorf("after the restart: %+v", runs)
		}
		return err
	})
	e.click("env-r", "trig-r", "U1", "ann", card.TS, resume)
	if h := e.handled(); h.res.Notice != "" {
		t.Fatalf("resume: %+v", h.res)
	}
	e.log.waitCall(t, "the answer", 1, "chat.postMessage", and(answer, blocksHave("All noted.")))
	if n := len(e.model.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2", n)
	}
}
