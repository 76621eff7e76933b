package agent

import (
	"fmt"
	"strings"
)

// When the loop resumes a run that a person let go on without a word, or when the model's
// reply was empty, it has to tell the model something. A fixed "Continue." says nothing the
// model can use (seed 004); the nudge is derived from the state instead: what went wrong and
// a request to reassess after failures, a reflection prompt when the run repeated itself, the
// reviewer's concern after a sanity pause, the next step the model planned, and nothing at
// all when the pause was the loop's own (a model error the model never saw).

// nudge is what the model is told when a run paused for kind goes on with no instruction.
// Empty means nothing is added.
func (st *State) nudge(p *Pause) string {
	var parts []string
	switch p.Kind {
	case PauseModelError:
		return ""
	case PauseFailures:
		if c := st.lastFailed(); c != nil {
			parts = append(parts, fmt.Sprintf("The person let the run go on after %d failed tool calls in a row; the last was %s: %s. "+
				"Before the next call, reassess what is going wrong and whether another approach would work.",
				st.ConsecutiveFailures, c.Name, firstLine(c.Error)))
		} else {
			parts = append(parts, "The person let the run go on after several failures. Reassess your approach before the next call.")
		}
	case PauseStuck:
		parts = append(parts, fmt.Sprintf("The person let the run go on after it stalled (%s). "+
			"Reflect on why the last steps made no progress, and take a different step rather than repeating one.", strings.TrimSuffix(p.Reason, ".")))
	case PauseMomentum:
		parts = append(parts, momentumNudge(st))
	case PauseSanity:
		parts = append(parts, fmt.Sprintf("A reviewer paused the run (%s); the person chose to go on. Take the concern into account.", strings.TrimSuffix(p.Reason, ".")))
	}
	parts = append(parts, st.nextStep())
	return strings.Join(parts, " ")
}

// nextStep points the model at the step its plan says comes next, or at the goal.
func (st *State) nextStep() string {
	for _, status := range []PlanStatus{PlanInProgress, PlanPending} {
		for _, it := range st.Plan {
			if it.Status == status {
				return "Go on with the next step of your plan: " + it.Step + "."
			}
		}
	}
	return "Go on toward the goal: call a tool, or answer in text if it is done."
}

// lastFailed returns the latest call that failed.
func (st *State) lastFailed() *CallRecord {
	for i := len(st.Calls) - 1; i >= 0; i-- {
		if s := st.Calls[i].Status; s == CallFailed || s == CallInvalid || s == CallUnknown {
			return &st.Calls[i]
		}
	}
	return nil
}

// firstLine is the first line of s, for quoting an error in a sentence.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
