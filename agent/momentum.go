package agent

import (
	"fmt"
	"strings"
)

// Momentum is seed 004's confidence: a score over a rolling window of the run's latest call
// outcomes. A run starts with full momentum (the window's empty places count as successes,
// so one early failure does not make a fresh run timid); each failure costs a place and each
// rejection two, because a person saying no is a stronger sign than a tool saying no. Below
// its level's SlowDown the run's cautious calls ask; below PauseBelow the run pauses for a
// check-in. The window is kept in the state, so it survives a restart.
type Momentum struct {
	// Outcomes holds the latest outcomes, oldest first: 's' success, 'f' failure, 'r'
	// rejection.
	Outcomes string `json:"outcomes,omitempty"`
}

// momentumWindow is how many outcomes the score looks at.
const momentumWindow = 8

// Outcome letters of Momentum.Outcomes.
const (
	outcomeSuccess   = 's'
	outcomeFailure   = 'f'
	outcomeRejection = 'r'
)

// Score is the momentum between 0 (everything went wrong) and 1.
func (m Momentum) Score() float64 {
	lost := 0
	for _, o := range m.Outcomes {
		switch o {
		case outcomeFailure:
			lost++
		case outcomeRejection:
			lost += 2
		}
	}
	if lost >= momentumWindow {
		return 0
	}
	return float64(momentumWindow-lost) / momentumWindow
}

// record adds one outcome and drops what falls out of the window.
func (m *Momentum) record(o byte) {
	m.Outcomes += string(o)
	if n := len(m.Outcomes); n > momentumWindow {
		m.Outcomes = m.Outcomes[n-momentumWindow:]
	}
}

// Setbacks counts the failures and rejections in the window.
func (m Momentum) Setbacks() (failed, rejected int) {
	return strings.Count(m.Outcomes, string(rune(outcomeFailure))), strings.Count(m.Outcomes, string(rune(outcomeRejection)))
}

// noteOutcome records a reported call's outcome in the run's momentum. The loop's own
// control calls (the plan, questions) say nothing about how the work goes.
func (r *runner) noteOutcome(c *CallRecord) {
	if c.Name == updatePlanName || c.Name == askUserName {
		return
	}
	switch c.Status {
	case CallSucceeded:
		r.st.Momentum.record(outcomeSuccess)
	case CallFailed, CallInvalid, CallUnknown:
		r.st.Momentum.record(outcomeFailure)
	case CallRejected:
		r.st.Momentum.record(outcomeRejection)
	}
}

// checkIn returns the pause the run takes after a step for the level's sake, if any: momentum
// below the level's pause threshold, or the level's every-N-steps check-in.
func (r *runner) checkIn() *Pause {
	st, lv := r.st, r.level()
	c := lv.Config()
	if score := st.Momentum.Score(); score < c.PauseBelow {
		return &Pause{Kind: PauseMomentum, Reason: r.momentumReason(score, c.PauseBelow)}
	}
	if c.PauseEveryN > 0 && st.Step > 0 && st.Step%c.PauseEveryN == 0 {
		return &Pause{Kind: PauseCheckIn, Reason: fmt.Sprintf("Check-in after %d steps (autonomy %s pauses every %d steps). "+
			"Continue, Stop, or reply with guidance.", st.Step, lv, c.PauseEveryN)}
	}
	return nil
}

// momentumReason says what went wrong, for the check-in card: the setbacks and the latest
// failed or rejected call.
func (r *runner) momentumReason(score, below float64) string {
	failed, rejected := r.st.Momentum.Setbacks()
	var b strings.Builder
	fmt.Fprintf(&b, "Momentum is low (%.2f, below %.2f): of the last %d calls, %d failed and %d were rejected.",
		score, below, len(r.st.Momentum.Outcomes), failed, rejected)
	for i := len(r.st.Calls) - 1; i >= 0; i-- {
		c := &r.st.Calls[i]
		switch c.Status {
		case CallFailed, CallInvalid, CallUnknown:
			fmt.Fprintf(&b, " The latest failure: %s: %s.", c.Name, truncate(firstLine(c.Error), 200))
		case CallRejected:
			fmt.Fprintf(&b, " The latest rejection: %s.", c.Name)
		default:
			continue
		}
		break
	}
	b.WriteString(" Continue, Stop, or reply with guidance.")
	return b.String()
}

// momentumNudge is what the model is told when a person lets a run with low momentum go on
// without a word: how many of its recent calls went wrong, and to change course.
func momentumNudge(st *State) string {
	s := "The person let the run go on after many of its recent calls failed or were rejected."
	if c := st.lastFailed(); c != nil {
		s += fmt.Sprintf(" The latest failure was %s: %s.", c.Name, firstLine(c.Error))
	}
	return s + " Reassess what is going wrong and take a different approach rather than repeating what failed."
}
