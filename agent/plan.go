package agent

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// A planned run (seeds 001 and 003) keeps its plan in State.Planning: the planner's steps,
// each with the executor sub-run that works on it, and the typed conversation between them.
// A sub-run is a State of its own, advanced by the same loop with its step's tools, and saved
// inside its parent, so a planned run is as durable as any other.

// Step scopes: which tools an executor may use.
const (
	ScopeReadOnly = "read_only"
	ScopeFull     = "full"
)

// maxPlanSteps bounds the steps of one plan.
const maxPlanSteps = 20

// PlanStep is one step of the planner's plan.
type PlanStep struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	DependsOn   []string `json:"depends_on,omitempty"`
	// Acceptance says when the step is done; the planner reviews the result against it.
	Acceptance string     `json:"acceptance,omitempty"`
	Scope      string     `json:"scope"`
	Status     PlanStatus `json:"status"`
	// Attempts counts the executor sub-runs the step has had.
	Attempts int `json:"attempts,omitempty"`
	// Guidance is what the planner told the executor when it sent the step back.
	Guidance string `json:"guidance,omitempty"`
	Result   string `json:"result,omitempty"`
	// Sub is the executor's sub-run of the current attempt.
	Sub *State `json:"sub,omitempty"`
}

// Planning is the planner's part of a run.
type Planning struct {
	// Decided is set once the planner was consulted; Steps stays empty when it chose to run
	// the goal in one loop (or could not plan it).
	Decided bool       `json:"decided"`
	Steps   []PlanStep `json:"steps,omitempty"`
	// Conversation is every message between the planner, the executors and the person.
	Conversation []PlanMessage `json:"conversation,omitempty"`
	// Calls and Usage count the planner's own model calls; Retired counts the steps and
	// usage of executor attempts that were replaced, so shared budgets never forget them.
	Calls        int   `json:"calls,omitempty"`
	Usage        Usage `json:"usage"`
	RetiredSteps int   `json:"retired_steps,omitempty"`
	Retired      Usage `json:"retired"`
	Revisions    int   `json:"revisions,omitempty"`
}

// Step returns the step with the given ID.
func (p *Planning) Step(id string) *PlanStep {
	if p == nil {
		return nil
	}
	for i := range p.Steps {
		if p.Steps[i].ID == id {
			return &p.Steps[i]
		}
	}
	return nil
}

// errPlan is wrapped by every reason a plan is refused.
var errPlan = errors.New("invalid plan")

// checkSteps refuses a plan whose IDs repeat, whose dependencies name unknown steps or form a
// cycle, or whose scope is unknown. done names steps of an earlier plan that a revision may
// depend on.
func checkSteps(steps []PlanStep, done map[string]bool) error {
	if len(steps) == 0 || len(steps) > maxPlanSteps {
		return fmt.Errorf("%w: %d steps (want 1 to %d)", errPlan, len(steps), maxPlanSteps)
	}
	byID := make(map[string]*PlanStep, len(steps))
	for i := range steps {
		s := &steps[i]
		switch {
		case strings.TrimSpace(s.ID) == "":
			return fmt.Errorf("%w: a step has no id", errPlan)
		case byID[s.ID] != nil || done[s.ID]:
			return fmt.Errorf("%w: two steps are named %q", errPlan, s.ID)
		case strings.TrimSpace(s.Description) == "":
			return fmt.Errorf("%w: step %s has no description", errPlan, s.ID)
		case s.Scope != ScopeReadOnly && s.Scope != ScopeFull:
			return fmt.Errorf("%w: step %s has scope %q (want %s or %s)", errPlan, s.ID, s.Scope, ScopeReadOnly, ScopeFull)
		}
		byID[s.ID] = s
	}
	for _, s := range steps {
		for _, d := range s.DependsOn {
			if byID[d] == nil && !done[d] {
				return fmt.Errorf("%w: step %s depends on unknown step %q", errPlan, s.ID, d)
			}
		}
	}
	// A depth-first walk that meets a step still on its path has found a cycle.
	const (
		unseen = iota
		onPath
		finished
	)
	mark := make(map[string]int, len(steps))
	var walk func(id string, path []string) error
	walk = func(id string, path []string) error {
		switch mark[id] {
		case onPath:
			return fmt.Errorf("%w: the dependencies form a cycle (%s)", errPlan, strings.Join(append(path, id), " -> "))
		case finished:
			return nil
		}
		mark[id] = onPath
		for _, d := range byID[id].DependsOn {
			if byID[d] == nil {
				continue // a step of the earlier plan, done already
			}
			if err := walk(d, append(path, id)); err != nil {
				return err
			}
		}
		mark[id] = finished
		return nil
	}
	for _, s := range steps {
		if err := walk(s.ID, nil); err != nil {
			return err
		}
	}
	return nil
}

// ready reports whether every step s depends on is done.
func (p *Planning) ready(s *PlanStep) bool {
	for _, d := range s.DependsOn {
		if dep := p.Step(d); dep == nil || dep.Status != PlanDone {
			return false
		}
	}
	return true
}

// checklist is the plan as the run's checklist (State.Plan), which every card and summary
// already shows: one line a step, saying who is on it.
func (p *Planning) checklist() []PlanItem {
	items := make([]PlanItem, 0, len(p.Steps))
	for _, s := range p.Steps {
		line := s.ID + ": " + s.Description
		if s.Status == PlanInProgress && s.Sub != nil {
			line += " (executor " + s.ID
			switch {
			case s.Sub.Status == StatusAwaitingApproval:
				line += ", waiting for approval"
			case s.Sub.Status == StatusAwaitingInput:
				line += ", waiting for an answer"
			}
			line += ")"
		}
		if s.Attempts > 1 {
			line += fmt.Sprintf(" [attempt %d]", s.Attempts)
		}
		items = append(items, PlanItem{Step: truncate(line, 300), Status: s.Status})
	}
	return items
}

// refresh brings the parts of the parent derived from its plan up to date: the checklist,
// and the steps and usage of the whole run (the planner's calls, every executor's steps and
// the attempts that were replaced), which the budgets and the card read.
func (st *State) refreshPlan() {
	p := st.Planning
	if p == nil || len(p.Steps) == 0 {
		return
	}
	st.Plan = p.checklist()
	steps, usage := p.Calls+p.RetiredSteps, p.Usage.Add(p.Retired)
	for _, s := range p.Steps {
		if s.Sub != nil {
			steps += s.Sub.Step
			usage = usage.Add(s.Sub.Usage)
		}
	}
	st.Step, st.Usage = steps, usage
}

// sub returns the step whose sub-run has the call with the given ID.
func (st *State) stepWithCall(id string) *PlanStep {
	if st.Planning == nil {
		return nil
	}
	for i := range st.Planning.Steps {
		s := &st.Planning.Steps[i]
		if s.Sub != nil && s.Sub.Call(id) != nil {
			return s
		}
	}
	return nil
}

// Clarify resumes a sub-run that waits for an answer with the planner's: to its ask_planner
// call, or to a question its last reply asked.
func (st *State) Clarify(answer string) error {
	if st.Status != StatusAwaitingInput || st.Pause == nil {
		return fmt.Errorf("clarify: %w", ErrNotPending)
	}
	switch st.Pause.Kind {
	case PauseAskUser:
		c := st.Call(st.Pause.CallID)
		if c == nil || c.Status != CallAwaitingInput {
			return fmt.Errorf("clarify: %w", ErrNotPending)
		}
		c.Status = CallSucceeded
		c.Output = "The planner answers: " + answer
	case PauseQuestion:
		st.Messages = append(st.Messages, Message{Role: RoleUser, Content: "The planner answers: " + answer})
	default:
		return fmt.Errorf("clarify a %s pause: %w", st.Pause.Kind, ErrNotPending)
	}
	return st.resume(StatusAwaitingInput, time.Time{})
}

// validatePlanning checks the plan of a saved state: its steps and each sub-run.
func (st *State) validatePlanning() error {
	p := st.Planning
	if p == nil || len(p.Steps) == 0 {
		return nil
	}
	if err := checkSteps(p.Steps, nil); err != nil {
		return fmt.Errorf("run state: %w", err)
	}
	for _, s := range p.Steps {
		if s.Sub == nil {
			continue
		}
		if s.Sub.Planning != nil {
			return fmt.Errorf("run state: the sub-run of step %s has a plan of its own", s.ID)
		}
		if err := s.Sub.Validate(); err != nil {
			return fmt.Errorf("step %s: %w", s.ID, err)
		}
	}
	return nil
}

// respondForStep passes a person's answer on to the sub-run of the step that waits for it, and
// records it in the planner's conversation.
func (st *State) respondForStep(text, from string) error {
	s := st.Planning.Step(st.Pause.Step)
	if s == nil || s.Sub == nil {
		return fmt.Errorf("respond for step %s: %w", st.Pause.Step, ErrNotPending)
	}
	if err := s.Sub.Respond(text, from); err != nil {
		return fmt.Errorf("respond for step %s: %w", s.ID, err)
	}
	if strings.TrimSpace(text) != "" {
		st.Planning.say(PlanMessage{Type: MsgClarification, From: "person " + from, To: executorName(s.ID), Step: s.ID, Text: text})
	}
	return st.resume(StatusAwaitingInput, time.Time{})
}

// AllCalls returns the run's tool calls and those of its plan steps' current sub-runs.
func (st *State) AllCalls() []CallRecord {
	out := append([]CallRecord(nil), st.Calls...)
	if st.Planning != nil {
		for _, s := range st.Planning.Steps {
			if s.Sub != nil {
				out = append(out, s.Sub.Calls...)
			}
		}
	}
	return out
}

// AnyCall reports whether f holds for one of the calls AllCalls returns, without copying
// them: the bot asks it of every checkpoint, inside the store's write transaction.
func (st *State) AnyCall(f func(c *CallRecord) bool) bool {
	for i := range st.Calls {
		if f(&st.Calls[i]) {
			return true
		}
	}
	if st.Planning != nil {
		for _, s := range st.Planning.Steps {
			if s.Sub == nil {
				continue
			}
			for i := range s.Sub.Calls {
				if f(&s.Sub.Calls[i]) {
					return true
				}
			}
		}
	}
	return false
}

// cancelSteps cancels the sub-runs of a run that ended (cancelled, failed, out of budget) and
// are not over, so that no call of theirs still waits for a decision or seems to run.
func (st *State) cancelSteps(reason string, now time.Time) {
	if st.Planning == nil {
		return
	}
	for i := range st.Planning.Steps {
		if sub := st.Planning.Steps[i].Sub; sub != nil && !sub.Status.Terminal() {
			_ = sub.Cancel(reason, now) // cannot fail: the sub-run is not over
		}
	}
}
