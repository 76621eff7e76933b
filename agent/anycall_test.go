package agent_test

import (
	"slices"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// TestAnyCallSeesWhatAllCallsLists checks AnyCall against AllCalls on a run's own calls and
// its plan steps' sub-runs' calls.
func TestAnyCallSeesWhatAllCallsLists(t *testing.T) {
	st := &agent.State{
		Calls: []agent.CallRecord{{ID: "own", Status: agent.CallSucceeded}},
		Planning: &agent.Planning{Decided: true, Steps: []agent.PlanStep{
			{ID: "s1"},
			{ID: "s2", Sub: &agent.State{Calls: []agent.CallRecord{{ID: "sub", Status: agent.CallUnknown}}}},
		}},
	}
	for _, id := range []string{"own", "sub", "none"} {
		f := func(c *agent.CallRecord) bool { return c.ID == id }
		want := slices.ContainsFunc(st.AllCalls(), func(c agent.CallRecord) bool { return f(&c) })
		if got := st.AnyCall(f); got != want || want != (id != "none") {
			t.Errorf("AnyCall(ID %s) = %v, AllCalls holds it: %v", id, got, want)
		}
	}
}
