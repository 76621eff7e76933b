package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The loop's own tools. They act on the run's State rather than on the world.
const (
	updatePlanName = "update_plan"
	askUserName    = "ask_user"
)

// controlTool is a tool the loop handles itself; its Call is never used.
type controlTool struct {
	info ToolInfo
}

func (t controlTool) Info() ToolInfo                    { return t.info }
func (t controlTool) Assess(json.RawMessage) Assessment { return Assessment{Risk: RiskSafe} }
func (t controlTool) Call(context.Context, Invocation) (string, error) {
	return "", errors.New("control tools are handled by the loop")
}

func controlTools() []Tool {
	return []Tool{
		controlTool{ToolInfo{Spec: ToolSpec{
			Name: updatePlanName,
			Description: "Replace your checklist for the goal. Send the whole list every time, each step with its status. " +
				"The user sees this checklist as the run's progress.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"plan":{"type":"array","minItems":1,"maxItems":50,` +
				`"items":{"type":"object","properties":{"step":{"type":"string","minLength":1,"maxLength":300},` +
				`"status":{"type":"string","enum":["pending","in_progress","done","failed"]}},"required":["step","status"],"additionalProperties":false}}},` +
				`"required":["plan"],"additionalProperties":false}`),
		}, Idempotent: true}},
		controlTool{ToolInfo{Spec: ToolSpec{
			Name:        askUserName,
			Description: "Ask the user a question and wait for the answer. Use it only for what you cannot find out or decide yourself.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string","minLength":1,"maxLength":2000}},` +
				`"required":["question"],"additionalProperties":false}`),
		}}},
		readOutputTool(),
	}
}

// updatePlan applies an update_plan call to the state.
func (r *runner) updatePlan(args string) callResult {
	var in struct {
		Plan []PlanItem `json:"plan"`
	}
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		return callResult{err: fmt.Errorf("update_plan: %w", err)}
	}
	r.st.Plan = in.Plan
	r.emit(Event{Kind: EventPlanUpdated})
	var b strings.Builder
	b.WriteString("Plan updated:")
	for _, it := range in.Plan {
		fmt.Fprintf(&b, "\n- [%s] %s", it.Status, it.Step)
	}
	return callResult{out: b.String()}
}

func askUserQuestion(args string) string {
	var in struct {
		Question string `json:"question"`
	}
	if json.Unmarshal([]byte(args), &in) != nil || strings.TrimSpace(in.Question) == "" {
		return "(the model asked a question it could not phrase)"
	}
	return in.Question
}
