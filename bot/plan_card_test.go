package bot

import (
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// The card of a planned run shows the steps as its checklist and the latest executor question
// with its answer, a line each.
func TestStatusCardOfAPlannedRun(t *testing.T) {
	st := agent.NewState("r1", "paint the shed", nil, time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	st.Plan = []agent.PlanItem{{Step: "s1: pick the colour", Status: agent.PlanDone}, {Step: "s2: paint (executor s2)", Status: agent.PlanInProgress}}
	conv := []agent.PlanMessage{
		{Type: agent.MsgTaskAssignment, From: "planner", To: "executor s1", Step: "s1", Text: "pick"},
		{Type: agent.MsgQuestion, From: "executor s1", To: "planner", Step: "s1", Text: "Which\ncolour?"},
		{Type: agent.MsgClarification, From: "planner", To: "executor s1", Step: "s1", Text: "Blue."},
	}
	st.Planning = &agent.Planning{Decided: true, Conversation: conv}
	tests := []struct {
		name string
		conv []agent.PlanMessage
		want string
	}{
		{"answered by the planner", conv, "Which colour?\nPlanner: Blue."},
		{"waiting", conv[:2], "Which colour?\n(waiting for an answer)"},
		{"answered by the person", append(append([]agent.PlanMessage(nil), conv[:2]...),
			agent.PlanMessage{Type: agent.MsgQuestion, From: "planner", To: "person", Step: "s1", Text: "Which colour?"},
			agent.PlanMessage{Type: agent.MsgClarification, From: "person ann", To: "executor s1", Step: "s1", Text: "Red"}),
			"Which colour?\nAnswered by ann: Red"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st.Planning.Conversation = tt.conv
			m := statusCard(&RunRecord{ID: "r1", Status: agent.StatusRunning, State: st})
			if len(m.Plan) != 2 || m.Plan[1].Text != "s2: paint (executor s2)" || m.Plan[1].Status != "in_progress" {
				t.Errorf("plan lines = %+v", m.Plan)
			}
			if len(m.Fields) != 1 || m.Fields[0].Name != "Question from executor s1" || m.Fields[0].Value != tt.want {
				t.Fatalf("fields = %+v, want the question and %q", m.Fields, tt.want)
			}
			if !strings.HasPrefix(m.Text, "Working: s2: paint") {
				t.Errorf("text %q does not say who is on what", m.Text)
			}
		})
	}
	// The card's steps are the executors' calls, the planner's questions left out.
	sub := agent.NewState("r1/s1.1", "pick", nil, time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	sub.Calls = []agent.CallRecord{{ID: "s1.1.a", Name: "ask_planner", Status: agent.CallSucceeded}, {ID: "s1.1.b", Name: "list_files", Status: agent.CallSucceeded}}
	st.Planning.Steps = []agent.PlanStep{{ID: "s1", Description: "pick", Scope: agent.ScopeReadOnly, Status: agent.PlanDone, Sub: sub}}
	if m := statusCard(&RunRecord{ID: "r1", Status: agent.StatusRunning, State: st}); len(m.Steps) != 1 || m.Steps[0].Tool != "list_files" {
		t.Errorf("card steps = %+v, want the executor's list_files", m.Steps)
	}
	st.Planning = nil
	if m := statusCard(&RunRecord{ID: "r1", Status: agent.StatusRunning, State: st}); len(m.Fields) != 0 {
		t.Errorf("an unplanned run's card has fields %+v", m.Fields)
	}
}
