package agent

import (
	"errors"
	"fmt"
	"time"
)

// ErrTransition is returned when a run is asked to change status in a way its life does not
// allow: completing a cancelled run, starting one twice, pausing one that is over.
var ErrTransition = errors.New("illegal run transition")

// The methods in this file are the only code that changes a run's Status (NewState sets the
// first one). The runner and the bot do the I/O around a change and call one of these; a test
// in this package checks with go/types that nothing else assigns a Status. Keeping the rules in
// one place is what lets a table test walk every legal transition and refuse every other.
//
// The life of a run:
//
//	queued ──Start──▶ running ──Complete──▶ completed
//	                  │  ▲  │ ──Exhaust───▶ budget_exhausted
//	                  │  │  └─Recover (a new process picks it up after a crash)
//	    AwaitApproval │  │ Decide (the last pending call is decided)
//	    AwaitInput    ▼  │ Respond
//	          awaiting_approval / awaiting_input
//
//	Fail and Cancel end any run that is not over yet.

// Start marks a queued run as running: the loop has picked it up for the first time, or the
// replica that creates it starts it as it is stored (bot/handoff.go).
func (st *State) Start(now time.Time) error {
	return st.move("start", StatusRunning, now, StatusQueued)
}

// Recover takes up a run that is already running: one a decision or an answer resumed, or one
// a process left running when it stopped (a crash, a deploy). The status does not change; the
// move exists so that the loop picks up only runs in a state it may advance.
func (st *State) Recover(now time.Time) error {
	return st.move("recover", StatusRunning, now, StatusRunning)
}

// AwaitApproval leaves a running run waiting for decisions on its pending calls.
func (st *State) AwaitApproval(reason string, now time.Time) error {
	if len(st.PendingApprovals()) == 0 {
		return fmt.Errorf("%w: no call of run %s awaits approval", ErrTransition, st.RunID)
	}
	if err := st.move("await approval", StatusAwaitingApproval, now, StatusRunning); err != nil {
		return err
	}
	st.Pause = &Pause{Kind: PauseApproval, Reason: reason}
	return nil
}

// AwaitInput leaves a running run waiting for a person's input: an answer to ask_user, or a word
// to go on after the loop stopped itself (stuck, failures, sanity, model errors). Approval waits
// go through AwaitApproval.
func (st *State) AwaitInput(p Pause, now time.Time) error {
	if p.Kind == PauseApproval || p.Kind == "" {
		return fmt.Errorf("%w: pause of kind %q (approvals use AwaitApproval)", ErrTransition, p.Kind)
	}
	if err := st.move("await input", StatusAwaitingInput, now, StatusRunning); err != nil {
		return err
	}
	st.Pause = &p
	return nil
}

// Complete ends a running run with the model's final answer.
func (st *State) Complete(answer string, now time.Time) error {
	if err := st.move("complete", StatusCompleted, now, StatusRunning); err != nil {
		return err
	}
	st.Pause = nil
	if answer != "" {
		st.Answer = answer
	}
	return nil
}

// Exhaust ends a running run because a budget is spent. reason is the sentence for the thread;
// answer is what the run has to show for itself.
func (st *State) Exhaust(reason, answer string, now time.Time) error {
	if err := st.move("exhaust", StatusBudgetExhausted, now, StatusRunning); err != nil {
		return err
	}
	st.cancelSteps(reason, now)
	st.Pause = nil
	st.Error = reason
	if answer != "" {
		st.Answer = answer
	}
	return nil
}

// Fail ends a run that is not over yet because it cannot go on. reason is the safe summary
// a person sees. A state whose status is not even valid (a damaged record) may fail too: that
// is how the bot stops retrying it.
func (st *State) Fail(reason string, now time.Time) error {
	from := st.Status
	if from.Terminal() {
		return fmt.Errorf("%w: cannot fail a %s run", ErrTransition, from)
	}
	if err := st.move("fail", StatusFailed, now, from); err != nil {
		return err
	}
	st.cancelSteps(reason, now)
	st.Pause = nil
	st.Error = reason
	return nil
}

// resume is the way back from a pause, taken by Decide and Respond once nothing waits.
func (st *State) resume(from Status, now time.Time) error {
	if err := st.move("resume", StatusRunning, now, from); err != nil {
		return err
	}
	st.Pause = nil
	return nil
}

// move changes the status to to when the run is in one of from, and refuses otherwise.
func (st *State) move(verb string, to Status, now time.Time, from ...Status) error {
	for _, f := range from {
		if st.Status == f {
			st.Status = to
			if !now.IsZero() {
				st.UpdatedAt = now.UTC()
			}
			return nil
		}
	}
	return fmt.Errorf("%w: cannot %s a %s run", ErrTransition, verb, st.Status)
}
