package agent

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestTransitions walks every move from every status: the legal ones land on the expected
// status, every other one is refused and leaves the state as it was.
func TestTransitions(t *testing.T) {
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	statuses := []Status{StatusQueued, StatusRunning, StatusAwaitingApproval, StatusAwaitingInput,
		StatusCompleted, StatusFailed, StatusCancelled, StatusBudgetExhausted}
	moves := []struct {
		name string
		do   func(*State) error
		// legal maps the statuses the move is allowed from to the status it leads to.
		legal map[Status]Status
	}{
		{"start", func(st *State) error { return st.Start(now) },
			map[Status]Status{StatusQueued: StatusRunning}},
		{"recover", func(st *State) error { return st.Recover(now) },
			map[Status]Status{StatusRunning: StatusRunning}},
		{"await approval", func(st *State) error { return st.AwaitApproval("1 tool call needs approval", now) },
			map[Status]Status{StatusRunning: StatusAwaitingApproval}},
		{"await input", func(st *State) error { return st.AwaitInput(Pause{Kind: PauseStuck, Reason: "stuck"}, now) },
			map[Status]Status{StatusRunning: StatusAwaitingInput}},
		{"decide", func(st *State) error { return st.Decide("c1", Decision{Approved: true, By: "ann", At: now}) },
			map[Status]Status{StatusAwaitingApproval: StatusRunning}},
		{"respond", func(st *State) error { return st.Respond("go on", "ann") },
			map[Status]Status{StatusAwaitingInput: StatusRunning}},
		{"complete", func(st *State) error { return st.Complete("done", now) },
			map[Status]Status{StatusRunning: StatusCompleted}},
		{"exhaust", func(st *State) error { return st.Exhaust("Stopped: the step budget is spent.", "", now) },
			map[Status]Status{StatusRunning: StatusBudgetExhausted}},
		{"fail", func(st *State) error { return st.Fail("the run could not go on", now) },
			map[Status]Status{StatusQueued: StatusFailed, StatusRunning: StatusFailed,
				StatusAwaitingApproval: StatusFailed, StatusAwaitingInput: StatusFailed}},
		{"cancel", func(st *State) error { return st.Cancel("cancelled by ann", now) },
			map[Status]Status{StatusQueued: StatusCancelled, StatusRunning: StatusCancelled,
				StatusAwaitingApproval: StatusCancelled, StatusAwaitingInput: StatusCancelled}},
	}
	for _, m := range moves {
		for _, from := range statuses {
			t.Run(fmt.Sprintf("%s from %s", m.name, from), func(t *testing.T) {
				st := stateIn(from)
				before := fmt.Sprintf("%+v", *st)
				err := m.do(st)
				to, legal := m.legal[from]
				if !legal {
					if err == nil {
						t.Fatalf("%s from %s was allowed (now %s)", m.name, from, st.Status)
					}
					if !errors.Is(err, ErrTransition) && !errors.Is(err, ErrNotPending) {
						t.Errorf("refusal %v is neither ErrTransition nor ErrNotPending", err)
					}
					if after := fmt.Sprintf("%+v", *st); after != before {
						t.Errorf("a refused move changed the state:\nbefore %s\nafter  %s", before, after)
					}
					return
				}
				if err != nil {
					t.Fatalf("%s from %s: %v", m.name, from, err)
				}
				if st.Status != to {
					t.Fatalf("%s from %s: status %s, want %s", m.name, from, st.Status, to)
				}
				if st.Status.Paused() != (st.Pause != nil) {
					t.Errorf("status %s with pause %+v", st.Status, st.Pause)
				}
				if err := st.Validate(); err != nil {
					t.Errorf("state after %s does not validate: %v", m.name, err)
				}
			})
		}
	}
}

// stateIn builds a state in status s with one call awaiting approval, so that every move has
// what it needs except the right status.
func stateIn(s Status) *State {
	st := NewState("r1", "tidy the repo", nil, time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC))
	st.Status = s
	st.Calls = []CallRecord{{ID: "c1", Name: "shell", Arguments: `{"command":"rm x"}`, Status: CallAwaitingApproval}}
	switch s {
	case StatusAwaitingApproval:
		st.Pause = &Pause{Kind: PauseApproval, Reason: "1 tool call needs approval"}
	case StatusAwaitingInput:
		st.Pause = &Pause{Kind: PauseFailures, Reason: "3 tool calls failed in a row"}
	}
	return st
}

// TestTransitionDetails checks what the moves carry besides the status.
func TestTransitionDetails(t *testing.T) {
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

	t.Run("await approval needs a pending call", func(t *testing.T) {
		st := stateIn(StatusRunning)
		st.Calls[0].Status = CallReady
		if err := st.AwaitApproval("x", now); !errors.Is(err, ErrTransition) {
			t.Fatalf("AwaitApproval with nothing pending: %v", err)
		}
	})
	t.Run("await input refuses an approval pause", func(t *testing.T) {
		st := stateIn(StatusRunning)
		if err := st.AwaitInput(Pause{Kind: PauseApproval}, now); !errors.Is(err, ErrTransition) {
			t.Fatalf("AwaitInput of kind approval: %v", err)
		}
	})
	t.Run("decide resumes only when the last call is decided", func(t *testing.T) {
		st := stateIn(StatusAwaitingApproval)
		st.Calls = append(st.Calls, CallRecord{ID: "c2", Name: "shell", Status: CallAwaitingApproval})
		if err := st.Decide("c1", Decision{Approved: true, By: "ann", At: now}); err != nil {
			t.Fatal(err)
		}
		if st.Status != StatusAwaitingApproval {
			t.Fatalf("one of two decided: status %s, want awaiting_approval", st.Status)
		}
		if err := st.Decide("c2", Decision{Approved: false, By: "ann", At: now}); err != nil {
			t.Fatal(err)
		}
		if st.Status != StatusRunning || st.Pause != nil {
			t.Fatalf("both decided: status %s pause %+v", st.Status, st.Pause)
		}
	})
	t.Run("fail and exhaust keep their reason", func(t *testing.T) {
		st := stateIn(StatusRunning)
		if err := st.Exhaust("Stopped: the token budget is spent.", "partial answer", now); err != nil {
			t.Fatal(err)
		}
		if st.Error != "Stopped: the token budget is spent." || st.Answer != "partial answer" || !st.UpdatedAt.Equal(now) {
			t.Fatalf("exhaust left error %q answer %q updated %v", st.Error, st.Answer, st.UpdatedAt)
		}
		st = stateIn(StatusAwaitingInput)
		if err := st.Fail("could not load the run", now); err != nil {
			t.Fatal(err)
		}
		if st.Error != "could not load the run" || st.Pause != nil {
			t.Fatalf("fail left error %q pause %+v", st.Error, st.Pause)
		}
	})
}
