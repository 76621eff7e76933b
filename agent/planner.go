package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// The planner (seeds 001 and 003) is a model role of its own: it decides whether a goal needs a
// plan and writes it, answers the executors' questions from the plan and the results so far,
// and reviews every result. Each of its replies is one JSON object checked against a schema;
// a reply that is not valid is sent back once with the reason, and a second invalid reply
// counts as no answer (the run goes on unplanned, the question goes to the person, the result
// is taken as it is), logged.

const plannerSystemPrompt = `You are the planner of loopbot, an agent working in a chat thread on a person's goal.
Executors work on the steps of your plan, each with only its step, the results of the steps it depends on
and its scope's tools (read_only: tools that change nothing; full: every tool). You never call tools yourself.
Reply with exactly one JSON object, as each request asks.`

const stepSchemaJSON = `{"type":"object","properties":{` +
	`"id":{"type":"string","minLength":1,"maxLength":20},` +
	`"description":{"type":"string","minLength":1,"maxLength":1000},` +
	`"depends_on":{"type":"array","items":{"type":"string"},"maxItems":20},` +
	`"acceptance":{"type":"string","maxLength":500},` +
	`"scope":{"type":"string","enum":["read_only","full"]}},` +
	`"required":["id","description","scope"]}`

// The planner's schemas are compiled on a planned run's first use, not at init: compiling
// them took 4,700 allocations at every start, planner or not. TestPlannerSchemasCompile
// compiles each.
var (
	decideSchema = lazySchema(`{"type":"object","properties":{"needs_plan":{"type":"boolean"},"reason":{"type":"string"},` +
		`"steps":{"type":"array","maxItems":20,"items":` + stepSchemaJSON + `}},"required":["needs_plan"]}`)
	answerSchema = lazySchema(`{"type":"object","properties":{"answer":{"type":"string","maxLength":4000},"escalate":{"type":"boolean"}},` +
		`"required":["escalate"]}`)
	reviewSchema = lazySchema(`{"type":"object","properties":{"verdict":{"type":"string","enum":["accept","retry","revise"]},` +
		`"reason":{"type":"string","maxLength":1000},"guidance":{"type":"string","maxLength":2000},` +
		`"steps":{"type":"array","maxItems":20,"items":` + stepSchemaJSON + `}},"required":["verdict","reason"]}`)
)

func mustSchema(raw string) *schema {
	s, err := compileSchema(json.RawMessage(raw))
	if err != nil {
		panic(err)
	}
	return s
}

// lazySchema returns a function that compiles raw, a literal of this package, on its first
// call.
func lazySchema(raw string) func() *schema {
	return sync.OnceValue(func() *schema { return mustSchema(raw) })
}

// stepSpec is a step as the planner writes it.
type stepSpec struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	DependsOn   []string `json:"depends_on"`
	Acceptance  string   `json:"acceptance"`
	Scope       string   `json:"scope"`
}

func (s stepSpec) step() PlanStep {
	return PlanStep{ID: s.ID, Description: s.Description, DependsOn: s.DependsOn, Acceptance: s.Acceptance, Scope: s.Scope, Status: PlanPending}
}

func specSteps(specs []stepSpec) []PlanStep {
	steps := make([]PlanStep, len(specs))
	for i, s := range specs {
		steps[i] = s.step()
	}
	return steps
}

// plannerModel is the planner role's model: its own, or the executor's.
func (a *Agent) plannerModel() Model {
	if a.planner != nil {
		return a.planner
	}
	return a.model
}

// consultPlanner asks the planner for one JSON object that passes sc and check, decoded into
// out. An invalid reply is sent back once with the reason. The calls count in the run's
// budgets.
func (r *runner) consultPlanner(ctx context.Context, task string, sc *schema, out any, check func() error) error {
	msgs := []Message{{Role: RoleSystem, Content: plannerSystemPrompt}, {Role: RoleUser, Content: task}}
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		reply, err := r.a.plannerModel().Complete(ctx, Request{JSON: true, Messages: msgs})
		if err != nil {
			return fmt.Errorf("planner: %w", err)
		}
		unlock := r.lockPlan()
		p := r.st.Planning
		p.Calls++
		p.Usage = p.Usage.Add(reply.Usage)
		r.st.refreshPlan()
		unlock()
		last = decodePlannerReply(reply.Message.Content, sc, out, check)
		if last == nil {
			return nil
		}
		r.a.log.Warn("planner reply not valid", "run", r.st.RunID, "attempt", attempt+1, "err", last, "reply", truncate(reply.Message.Content, 300))
		msgs = append(msgs, Message{Role: RoleAssistant, Content: reply.Message.Content},
			Message{Role: RoleUser, Content: "That reply is not valid: " + last.Error() + ". Reply again with only the JSON object."})
	}
	return fmt.Errorf("planner: %w", last)
}

func decodePlannerReply(text string, sc *schema, out any, check func() error) error {
	start, end := strings.Index(text, "{"), strings.LastIndex(text, "}")
	if start < 0 || end <= start {
		return fmt.Errorf("no JSON object in the reply")
	}
	raw := text[start : end+1]
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return fmt.Errorf("the reply is not JSON: %v", err)
	}
	if err := sc.validate(m); err != nil {
		return fmt.Errorf("the reply does not match the schema: %v", err)
	}
	if err := json.Unmarshal([]byte(raw), out); err != nil {
		return fmt.Errorf("the reply does not decode: %v", err)
	}
	if check != nil {
		return check()
	}
	return nil
}

// decidePlan is the planner's first call: does the goal need a plan, and which. With
// planning "always" a goal the planner would run in one loop becomes a plan of one step.
func (r *runner) decidePlan(ctx context.Context) {
	st := r.st
	st.Planning = &Planning{Decided: true}
	always := r.a.cfg.Planning == PlanningAlways
	var task strings.Builder
	fmt.Fprintf(&task, "Goal: %s\n\n", st.Goal)
	if len(st.Pinned) > 0 {
		task.WriteString("Facts to keep in mind:\n- " + strings.Join(st.Pinned, "\n- ") + "\n\n")
	}
	if !always {
		task.WriteString(`Decide whether this goal needs a plan. A goal one agent can do in a few tool calls does not: reply {"needs_plan": false, "reason": "..."}. ` +
			"A goal with several distinct parts does: ")
	}
	task.WriteString(`reply {"needs_plan": true, "reason": "...", "steps": [{"id": "s1", "description": "...", "depends_on": [], "acceptance": "when it is done", "scope": "read_only" or "full"}]}. ` +
		"Give each step the ids of the steps whose results it needs; steps that need nothing of each other run at the same time. " +
		"Use scope read_only for steps that only look things up.")
	var out struct {
		NeedsPlan bool       `json:"needs_plan"`
		Reason    string     `json:"reason"`
		Steps     []stepSpec `json:"steps"`
	}
	err := r.consultPlanner(ctx, task.String(), decideSchema(), &out, func() error {
		if !out.NeedsPlan {
			return nil
		}
		return checkSteps(specSteps(out.Steps), nil)
	})
	// An unplanned run counts the planner's calls in its usage, not as steps of its loop.
	switch {
	case err != nil:
		r.a.log.Warn("planner could not plan; the run goes on unplanned", "run", st.RunID, "err", err)
		st.Usage = st.Usage.Add(st.Planning.Usage)
		return
	case !out.NeedsPlan && always:
		out.Steps = []stepSpec{{ID: "s1", Description: st.Goal, Scope: ScopeFull}}
	case !out.NeedsPlan:
		r.a.log.Info("planner: no plan needed", "run", st.RunID, "reason", out.Reason)
		st.Usage = st.Usage.Add(st.Planning.Usage)
		return
	}
	st.Planning.Steps = specSteps(out.Steps)
	var b strings.Builder
	for _, s := range st.Planning.Steps {
		fmt.Fprintf(&b, "\n%s: %s", s.ID, s.Description)
		if len(s.DependsOn) > 0 {
			fmt.Fprintf(&b, " (after %s)", strings.Join(s.DependsOn, ", "))
		}
	}
	st.Planning.say(PlanMessage{Type: MsgProgressUpdate, From: planner, To: "person", Text: "Plan:" + b.String(), Reason: out.Reason, At: r.a.now().UTC()})
	st.refreshPlan()
	r.emit(Event{Kind: EventPlanUpdated})
}

// answerQuestion asks the planner to answer an executor's question from the plan and the
// results so far. ok is false when the planner cannot (or would rather the person answered).
func (r *runner) answerQuestion(ctx context.Context, s *PlanStep, question string) (answer string, ok bool) {
	unlock := r.lockPlan()
	brief := r.planBrief()
	unlock()
	task := brief + fmt.Sprintf("\nThe executor of step %s asks: %s\n\n", s.ID, question) +
		`Answer it from the goal, the plan and the results so far: {"answer": "...", "escalate": false}. ` +
		`If only the person can answer (a preference, a secret, a choice the goal leaves open), reply {"escalate": true}.`
	var out struct {
		Answer   string `json:"answer"`
		Escalate bool   `json:"escalate"`
	}
	if err := r.consultPlanner(ctx, task, answerSchema(), &out, nil); err != nil {
		r.a.log.Warn("planner could not answer; the question goes to the person", "run", r.st.RunID, "step", s.ID, "err", err)
		return "", false
	}
	if out.Escalate || strings.TrimSpace(out.Answer) == "" {
		return "", false
	}
	return out.Answer, true
}

// planBrief is the goal, the plan with each step's state and the results so far, for the
// planner's later calls.
func (r *runner) planBrief() string {
	st := r.st
	var b strings.Builder
	fmt.Fprintf(&b, "Goal: %s\n\nPlan:\n", st.Goal)
	for _, s := range st.Planning.Steps {
		fmt.Fprintf(&b, "- %s [%s] %s", s.ID, s.Status, s.Description)
		if len(s.DependsOn) > 0 {
			fmt.Fprintf(&b, " (after %s)", strings.Join(s.DependsOn, ", "))
		}
		if s.Acceptance != "" {
			fmt.Fprintf(&b, "; done when: %s", s.Acceptance)
		}
		b.WriteString("\n")
		if s.Result != "" {
			fmt.Fprintf(&b, "  result: %s\n", truncate(s.Result, 1500))
		}
	}
	return b.String()
}
