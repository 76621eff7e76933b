package agent_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// A person's pause request is taken at the next step boundary: the call in flight finishes
// and is reported, the run waits for input as paused, the saved state resumes after a
// restart, and the model is told nothing of the pause.
func TestPauseAtStepBoundary(t *testing.T) {
	var asked atomic.Bool
	work := &fakeTool{name: "work", fn: func(context.Context, json.RawMessage) (string, error) {
		asked.Store(true) // the request arrives while the call runs
		return "worked", nil
	}}
	llm := newLLM(t, calls(call("work", `{"q":"1"}`)), text("done"))
	ag := newAgent(t, llm.model, agent.Config{}, []agent.Tool{work})
	r := newRun(t, ag, "work once")
	h := r.hooks()
	h.Hold = func(context.Context) (string, error) {
		if asked.Load() {
			return "ann", nil
		}
		return "", nil
	}
	if err := ag.Run(context.Background(), r.st, h); err != nil {
		t.Fatal(err)
	}
	r.wantStatus(agent.StatusAwaitingInput)
	if r.st.Pause.Kind != agent.PausePerson || r.st.Pause.Reason != "Paused by ann." {
		t.Fatalf("pause %+v", r.st.Pause)
	}
	if c := r.st.Calls[0]; c.Status != agent.CallSucceeded || !c.Reported || work.calls.Load() != 1 {
		t.Fatalf("the call in flight: %+v, ran %d times", c, work.calls.Load())
	}
	r.reload()
	r.wantStatus(agent.StatusAwaitingInput)
	if err := r.st.Respond("", "ann"); err != nil {
		t.Fatal(err)
	}
	asked.Store(false)
	if err := ag.Run(context.Background(), r.st, h); err != nil {
		t.Fatal(err)
	}
	r.wantStatus(agent.StatusCompleted)
	if n := len(llm.requests()); n != 2 {
		t.Fatalf("%d model requests, want 2", n)
	}
	if last := llm.requests()[1]; last.Messages[len(last.Messages)-1].Role != agent.RoleTool {
		t.Errorf("the request after the resume ends with %+v, want the tool's result and nothing about the pause", last.Messages[len(last.Messages)-1])
	}
}
