package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// An empty allowlist allows none of the agent's tools, and stays empty, not nil, through a
// save: a reloaded run must not gain every tool.
func TestEmptyAllowlistSurvivesASave(t *testing.T) {
	fetch := &fakeTool{name: "fetch", readOnly: true}
	llm := newLLM(t, calls(call("fetch", `{}`)), text("done"))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{fetch}), "think only")
	r.st.AllowedTools = []string{}
	data, err := json.Marshal(r.st)
	if err != nil {
		t.Fatal(err)
	}
	st, err := agent.UnmarshalState(data)
	if err != nil {
		t.Fatal(err)
	}
	if st.AllowedTools == nil {
		t.Fatal("an empty allowlist came back nil from a save")
	}
	r.st = st
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if fetch.calls.Load() != 0 {
		t.Fatal("a tool outside an empty allowlist ran")
	}
	for _, tl := range llm.requests()[0].Tools {
		if tl.Name == "fetch" {
			t.Fatal("the model was offered a tool outside the allowlist")
		}
	}
	if c := r.st.Calls[0]; c.Status != agent.CallInvalid || !strings.Contains(c.Error, "not among the tools this run may use") {
		t.Fatalf("call = %+v, want refused", c)
	}
}
