package agent_test

import (
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// A schema that is JSON but not a schema that compiles is found when a run starts, before its
// first model call: the run fails naming the tool, and the model is never asked.
func TestBadSchemaFailsTheRunBeforeItsFirstModelCall(t *testing.T) {
	llm := newLLM(t, text("never asked"))
	ag, err := agent.New(agent.Config{}, llm.model, []agent.Tool{&fakeTool{name: "good"}, &fakeTool{name: "bad", schema: `{"type":3}`}})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if err := ag.CheckSchemas(); err == nil || !strings.Contains(err.Error(), "tool bad: parameter schema") {
		t.Errorf("CheckSchemas = %v, want the bad tool named", err)
	}
	r := newRun(t, ag, "goal")
	r.advance()
	r.wantStatus(agent.StatusFailed)
	if !strings.Contains(r.st.Error, "tool bad: parameter schema") {
		t.Errorf("error = %q, want the bad tool named", r.st.Error)
	}
	if n := len(llm.requests()); n != 0 {
		t.Errorf("the model was asked %d times", n)
	}
}

// With good schemas CheckSchemas passes, control tools included, and runs are not held up.
func TestGoodSchemasCheck(t *testing.T) {
	llm := newLLM(t, text("done"))
	ag, err := agent.New(agent.Config{}, llm.model, []agent.Tool{&fakeTool{name: "good"}})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if err := ag.CheckSchemas(); err != nil {
		t.Fatalf("CheckSchemas: %v", err)
	}
	r := newRun(t, ag, "goal")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
}
