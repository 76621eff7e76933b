package agent

import (
	"context"
	"fmt"
	"strings"
)

// After each executor result the planner observes it (seed 003): it accepts the result, sends
// the step back to its executor with guidance (at most Config.StepRetries times), or revises
// the steps not done yet. The verdict and its reason are recorded in the conversation.

type review struct {
	Verdict  string     `json:"verdict"`
	Reason   string     `json:"reason"`
	Guidance string     `json:"guidance"`
	Steps    []stepSpec `json:"steps"`
}

// reviewStep asks the planner about the finished sub-run of s and applies its verdict. It
// returns a reason to fail the run when the plan cannot go on.
func (r *runner) reviewStep(ctx context.Context, s *PlanStep) (failure string) {
	st := r.st
	sub := s.Sub
	failed := sub.Status != StatusCompleted
	outcome := sub.Answer
	if failed {
		outcome = "the executor failed: " + sub.Error
	}
	retriesLeft := max(r.a.cfg.StepRetries, 0) - (s.Attempts - 1)
	done := r.doneSteps()
	if !failed {
		done[s.ID] = true // a revision keeps the step under review as done: it may build on it
	}
	task := r.planBrief() + fmt.Sprintf("\nThe executor of step %s (attempt %d) reports: %s\n\n", s.ID, s.Attempts, truncate(outcome, 3000)) +
		`Review it against the step's acceptance. Reply {"verdict": "accept", "reason": "..."} if it does the step; ` +
		fmt.Sprintf(`{"verdict": "retry", "reason": "...", "guidance": "what to do differently"} to send it back (%d retries left); `, retriesLeft) +
		`or {"verdict": "revise", "reason": "...", "steps": [...]} to replace every step not done yet with new steps ` +
		`(same fields as the plan; they may depend on the done steps).`
	var out review
	err := r.consultPlanner(ctx, task, reviewSchema(), &out, func() error {
		switch {
		case out.Verdict == VerdictRevise && len(done)+len(out.Steps) > maxPlanSteps:
			return fmt.Errorf("%w: %d steps are done, so at most %d new ones fit", errPlan, len(done), maxPlanSteps-len(done))
		case out.Verdict == VerdictRevise:
			return checkSteps(specSteps(out.Steps), done)
		case out.Verdict == VerdictAccept && failed:
			return fmt.Errorf("the step failed, so it cannot be accepted: retry it or revise the plan")
		}
		return nil
	})
	if ctx.Err() != nil {
		return "" // interrupted: nothing is decided, and the caller leaves the step as it was
	}
	if err != nil {
		r.a.log.Warn("planner could not review; the result is taken as it is", "run", st.RunID, "step", s.ID, "err", err)
		out = review{Verdict: VerdictAccept, Reason: "the planner gave no valid review"}
	}
	now := r.a.now().UTC()
	note := PlanMessage{Type: MsgProgressUpdate, From: planner, To: executorName(s.ID), Step: s.ID, Verdict: out.Verdict, Reason: out.Reason, At: now}
	switch {
	case out.Verdict == VerdictRetry && retriesLeft <= 0:
		s.Status = PlanFailed
		note.Text = fmt.Sprintf("Step %s is not done after %d attempts.", s.ID, s.Attempts)
		st.Planning.say(note)
		return fmt.Sprintf("Step %s was not done after %d attempts: %s", s.ID, s.Attempts, out.Reason)
	case out.Verdict == VerdictRetry:
		st.Planning.RetiredSteps += sub.Step
		st.Planning.Retired = st.Planning.Retired.Add(sub.Usage)
		s.Sub, s.Status, s.Guidance, s.Result = nil, PlanPending, out.Guidance, ""
		note.Type, note.Text = MsgTaskAssignment, "Again, with guidance: "+out.Guidance
		st.Planning.say(note)
	case out.Verdict == VerdictRevise:
		note.Text = "The remaining plan is revised."
		if failed {
			s.Status = PlanFailed
		} else {
			s.Status, s.Result = PlanDone, sub.Answer
		}
		st.Planning.say(note)
		r.revise(out.Steps)
	case failed:
		s.Status = PlanFailed
		note.Text = "Step " + s.ID + " failed."
		st.Planning.say(note)
		return fmt.Sprintf("Step %s failed: %s", s.ID, sub.Error)
	default:
		s.Status, s.Result = PlanDone, sub.Answer
		note.Text = "Accepted."
		st.Planning.say(note)
	}
	st.refreshPlan()
	r.emit(Event{Kind: EventPlanUpdated})
	return ""
}

// doneSteps names the steps that are done, which a revision keeps.
func (r *runner) doneSteps() map[string]bool {
	done := map[string]bool{}
	for _, s := range r.st.Planning.Steps {
		if s.Status == PlanDone {
			done[s.ID] = true
		}
	}
	return done
}

// revise replaces the steps not done with the planner's new ones. What the dropped steps'
// executors spent stays counted (Planning.Retired).
func (r *runner) revise(specs []stepSpec) {
	p := r.st.Planning
	kept := make([]PlanStep, 0, len(p.Steps)+len(specs))
	for _, s := range p.Steps {
		if s.Status == PlanDone {
			kept = append(kept, s)
			continue
		}
		if s.Sub != nil {
			p.RetiredSteps += s.Sub.Step
			p.Retired = p.Retired.Add(s.Sub.Usage)
		}
	}
	p.Steps = append(kept, specSteps(specs)...)
	p.Revisions++
	var ids []string
	for _, s := range specs {
		ids = append(ids, s.ID+": "+s.Description)
	}
	p.say(PlanMessage{Type: MsgProgressUpdate, From: planner, To: "person", Verdict: VerdictRevise, Text: "New steps: " + strings.Join(ids, "; "), At: r.a.now().UTC()})
}
