package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// StateVersion is the version of the State encoding. A saved state with a newer version is
// refused rather than misread.
const StateVersion = 1

// Status is where a run is in its life.
type Status string

// The run statuses. transition.go holds the moves between them; docs/ARCHITECTURE.md,
// "The run: one durable state machine", draws them.
const (
	StatusQueued           Status = "queued"
	StatusRunning          Status = "running"
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusAwaitingInput    Status = "awaiting_input"
	StatusCompleted        Status = "completed"
	StatusFailed           Status = "failed"
	StatusCancelled        Status = "cancelled"
	StatusBudgetExhausted  Status = "budget_exhausted"
)

// Terminal reports whether a run in this status is over for good.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusBudgetExhausted:
		return true
	}
	return false
}

// Paused reports whether a run in this status waits for a person.
func (s Status) Paused() bool {
	return s == StatusAwaitingApproval || s == StatusAwaitingInput
}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusQueued, StatusRunning, StatusAwaitingApproval, StatusAwaitingInput,
		StatusCompleted, StatusFailed, StatusCancelled, StatusBudgetExhausted:
		return true
	}
	return false
}

// PlanStatus is the state of one plan item.
type PlanStatus string

// Plan item statuses, as the model sets them through update_plan.
const (
	PlanPending    PlanStatus = "pending"
	PlanInProgress PlanStatus = "in_progress"
	PlanDone       PlanStatus = "done"
	PlanFailed     PlanStatus = "failed"
)

// PlanItem is one line of the checklist the model keeps with update_plan.
type PlanItem struct {
	Step   string     `json:"step"`
	Status PlanStatus `json:"status"`
}

// CallStatus is where one tool call is. The order of a call's life is
// awaiting_approval|ready -> (approved|rejected) -> started -> succeeded|failed|unknown;
// invalid calls never run.
type CallStatus string

// Tool call statuses.
const (
	CallAwaitingApproval CallStatus = "awaiting_approval"
	CallAwaitingInput    CallStatus = "awaiting_input"
	CallReady            CallStatus = "ready"
	CallApproved         CallStatus = "approved"
	CallRejected         CallStatus = "rejected"
	CallStarted          CallStatus = "started"
	CallSucceeded        CallStatus = "succeeded"
	CallFailed           CallStatus = "failed"
	CallInvalid          CallStatus = "invalid"
	CallUnknown          CallStatus = "unknown"
)

// Done reports whether the call has an outcome to report to the model.
func (s CallStatus) Done() bool {
	switch s {
	case CallSucceeded, CallFailed, CallRejected, CallInvalid, CallUnknown:
		return true
	}
	return false
}

// Decision is a person's answer to an approval request.
type Decision struct {
	Approved bool      `json:"approved"`
	By       string    `json:"by"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at,omitzero"`
}

// CallRecord is the durable record of one tool call: intent before it runs, result after.
type CallRecord struct {
	ID         string     `json:"id"`
	Step       int        `json:"step"`
	Name       string     `json:"name"`
	Arguments  string     `json:"arguments"`
	ArgsHash   string     `json:"args_hash"`
	Risk       Risk       `json:"risk,omitempty"`
	RiskReason string     `json:"risk_reason,omitempty"`
	Status     CallStatus `json:"status"`
	Output     string     `json:"output,omitempty"`
	Error      string     `json:"error,omitempty"`
	Decision   *Decision  `json:"decision,omitempty"`
	Attempts   int        `json:"attempts,omitempty"`
	StartedAt  time.Time  `json:"started_at,omitzero"`
	FinishedAt time.Time  `json:"finished_at,omitzero"`
	// Reported is set once the outcome went into Messages as a tool message.
	Reported bool `json:"reported,omitempty"`
	// Reads is the outside source the call brings in (Assessment.Reads).
	Reads string `json:"reads,omitempty"`
	// GrantPattern is the argument pattern an "Always allow here" of this call would grant
	// (grant.go); empty when the call can only be approved for once or for the run.
	GrantPattern string `json:"grant_pattern,omitempty"`
	// GrantedBy names the grant that let the call run without asking.
	GrantedBy *GrantUse `json:"granted_by,omitempty"`
	// FlowHeld marks a call the data-flow guard holds: no grant covers it, so its card
	// offers none.
	FlowHeld bool `json:"flow_held,omitempty"`
	// Preview is what the tool says the call would change (Previewer), taken when the
	// call came to need approval, for the approval card.
	Preview string `json:"preview,omitempty"`
}

// PauseKind says why a run waits for a person.
type PauseKind string

// Reasons for a pause.
const (
	PauseApproval   PauseKind = "approval"
	PauseAskUser    PauseKind = "ask_user"
	PauseStuck      PauseKind = "stuck"
	PauseFailures   PauseKind = "failures"
	PauseSanity     PauseKind = "sanity"
	PauseModelError PauseKind = "model_error"
	// PauseQuestion: the model's reply asks the person something instead of finishing.
	PauseQuestion PauseKind = "question"
	// PauseMomentum: too many recent calls failed or were rejected (momentum.go).
	PauseMomentum PauseKind = "momentum"
	// PauseCheckIn: the autonomy level's check-in every N steps.
	PauseCheckIn PauseKind = "check_in"
)

// Pause describes why a paused run waits and what it asks.
type Pause struct {
	Kind PauseKind `json:"kind"`
	// Reason is a short sentence for the thread.
	Reason string `json:"reason"`
	// Question is the model's question for PauseAskUser.
	Question string `json:"question,omitempty"`
	// CallID is the ask_user call the answer goes to.
	CallID string `json:"call_id,omitempty"`
	// Step names the plan step whose executor sub-run waits (plan.go); a decision or an
	// answer goes on to that sub-run.
	Step string `json:"step,omitempty"`
}

// Streak counts how many times in a row the same thing happened.
type Streak struct {
	Key   string `json:"key,omitempty"`
	Count int    `json:"count,omitempty"`
}

// hit records one more occurrence of key and returns the length of the streak.
func (s *Streak) hit(key string) int {
	if s.Key == key {
		s.Count++
	} else {
		s.Key, s.Count = key, 1
	}
	return s.Count
}

// State is everything about one run. It is a plain value that marshals to JSON and is saved
// after every step: the loop needs nothing else to resume it, in this process or the next.
type State struct {
	Version int    `json:"version"`
	RunID   string `json:"run_id"`
	Goal    string `json:"goal"`
	Status  Status `json:"status"`
	// Messages is the whole conversation with the model: earlier turns of the thread, the
	// goal, and every exchange since. Prompts are built from it; it is never trimmed.
	Messages []Message    `json:"messages"`
	Pinned   []string     `json:"pinned,omitempty"`
	Plan     []PlanItem   `json:"plan,omitempty"`
	Calls    []CallRecord `json:"calls,omitempty"`
	// Step counts model consultations of the main loop.
	Step  int   `json:"step"`
	Usage Usage `json:"usage"`
	// Active is the time the loop has spent working on the run, pauses excluded.
	Active    time.Duration `json:"active"`
	CreatedAt time.Time     `json:"created_at,omitzero"`
	UpdatedAt time.Time     `json:"updated_at,omitzero"`

	ConsecutiveFailures int            `json:"consecutive_failures,omitempty"`
	ToolFailures        map[string]int `json:"tool_failures,omitempty"`
	RepeatedCall        Streak         `json:"repeated_call,omitzero"`
	RepeatedError       Streak         `json:"repeated_error,omitzero"`
	// Recent holds the keys of the latest calls, oldest first, for cycle detection.
	Recent []string `json:"recent,omitempty"`
	// ProgressAt is the last step that brought something new: a result not seen before in
	// the run, or a changed plan. Outputs holds hashes of the latest results, for telling.
	ProgressAt int      `json:"progress_at,omitempty"`
	Outputs    []string `json:"outputs,omitempty"`
	// Summaries hold the summarizer's digest of older tool outputs, by call ID, so that each
	// output is summarised once.
	Summaries map[string]string `json:"summaries,omitempty"`
	// BudgetWarned is set once the budget warning was given; FinalAsked once the final
	// answer without tools was requested.
	BudgetWarned   bool `json:"budget_warned,omitempty"`
	FinalAsked     bool `json:"final_asked,omitempty"`
	LastSanityStep int  `json:"last_sanity_step,omitempty"`

	// Exposed names the first outside source the run has read (dataflow.go); empty while the
	// run has read none.
	Exposed string `json:"exposed,omitempty"`
	// SteerSeq is the number of the last note a person sent the working run that the loop
	// took into the conversation (steer.go).
	SteerSeq int `json:"steer_seq,omitempty"`
	// AllowedTools, when not nil, are the only tools (besides the loop's control tools) the
	// run may call: a playbook's allowlist (allowlist.go). Empty but not nil allows none;
	// omitzero keeps that apart from nil through a save.
	AllowedTools []string `json:"allowed_tools,omitzero"`
	// Reviews are the sanity verdicts the thread is shown (review.go), oldest first.
	Reviews []Review `json:"reviews,omitempty"`
	// Nonce marks the untrusted content in this run's prompts (untrusted.go). It is random
	// per run, drawn when the loop first takes the run up, and never shown outside prompts.
	Nonce string `json:"nonce,omitempty"`
	// Autonomy is the level the run works at (autonomy.go): its channel's when it started,
	// and the channel's new level once an approver changes it. Empty means the configured
	// default.
	Autonomy Level `json:"autonomy,omitempty"`
	// PlaybookLevel is the autonomy level the run's playbook asks for; the run works at it
	// when it is more careful than Autonomy, never when bolder (allowlist.go).
	PlaybookLevel Level `json:"playbook_level,omitempty"`
	// Momentum is the window of the run's latest call outcomes (momentum.go).
	Momentum Momentum `json:"momentum,omitzero"`

	// Planning is the planner's plan and conversation (plan.go); nil in a run never planned.
	Planning *Planning `json:"planning,omitempty"`
	// Grants are the run's "Approve for this run" grants (grant.go).
	Grants []Grant `json:"grants,omitempty"`

	Pause  *Pause `json:"pause,omitempty"`
	Answer string `json:"answer,omitempty"`
	Error  string `json:"error,omitempty"`
}

// NewState starts a run for goal. history holds earlier turns of the same thread (user goals
// and assistant answers), so a follow-up sees what came before.
func NewState(runID, goal string, history []Message, now time.Time) *State {
	msgs := make([]Message, 0, len(history)+1)
	msgs = append(msgs, history...)
	msgs = append(msgs, Message{Role: RoleUser, Content: goal})
	return &State{
		Version:   StateVersion,
		RunID:     runID,
		Goal:      goal,
		Status:    StatusQueued,
		Messages:  msgs,
		CreatedAt: now.UTC(),
		UpdatedAt: now.UTC(),
	}
}

// UnmarshalState decodes a saved state and checks that it can be resumed.
func UnmarshalState(data []byte) (*State, error) {
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("decode run state: %w", err)
	}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	return &st, nil
}

// Validate checks the invariants a resumable state keeps.
func (st *State) Validate() error {
	switch {
	case st.Version < 1 || st.Version > StateVersion:
		return fmt.Errorf("run state version %d not supported (this loopbot reads up to %d)", st.Version, StateVersion)
	case st.RunID == "":
		return errors.New("run state has no run id")
	case !st.Status.Valid():
		return fmt.Errorf("run state has unknown status %q", st.Status)
	case st.Step < 0:
		return fmt.Errorf("run state has negative step %d", st.Step)
	}
	seen := make(map[string]bool, len(st.Calls))
	for _, c := range st.Calls {
		if c.ID == "" || seen[c.ID] {
			return fmt.Errorf("run state has a missing or repeated call id %q", c.ID)
		}
		seen[c.ID] = true
	}
	if st.Status.Paused() && st.Pause == nil {
		return fmt.Errorf("run state is %s with no pause reason", st.Status)
	}
	return st.validatePlanning()
}

// Call returns the record of the call with the given ID, in the run or in one of its plan
// steps' sub-runs.
func (st *State) Call(id string) *CallRecord {
	for i := range st.Calls {
		if st.Calls[i].ID == id {
			return &st.Calls[i]
		}
	}
	if s := st.stepWithCall(id); s != nil {
		return s.Sub.Call(id)
	}
	return nil
}

// PendingApprovals returns the calls that wait for a decision, the sub-runs' included.
func (st *State) PendingApprovals() []CallRecord {
	var out []CallRecord
	for _, c := range st.Calls {
		if c.Status == CallAwaitingApproval {
			out = append(out, c)
		}
	}
	if st.Planning != nil {
		for _, s := range st.Planning.Steps {
			if s.Sub != nil {
				out = append(out, s.Sub.PendingApprovals()...)
			}
		}
	}
	return out
}

// ErrNotPending is returned when a decision or answer arrives for something that no longer
// waits for it.
var ErrNotPending = errors.New("not waiting for this")

// Decide records a person's decision on a call that awaits approval. When no call of the step
// waits any more, the run is running again and the caller resumes it.
func (st *State) Decide(callID string, d Decision) error {
	if s := st.stepWithCall(callID); s != nil && st.Status == StatusAwaitingApproval {
		// A step's call: its sub-run takes the decision, and the run goes on once no call
		// of any step waits.
		if err := s.Sub.Decide(callID, d); err != nil {
			return err
		}
		if len(st.PendingApprovals()) == 0 {
			return st.resume(StatusAwaitingApproval, d.At.UTC())
		}
		return nil
	}
	c := st.Call(callID)
	if c == nil || c.Status != CallAwaitingApproval || st.Status != StatusAwaitingApproval {
		return fmt.Errorf("decide call %s: %w", callID, ErrNotPending)
	}
	d.At = d.At.UTC()
	c.Decision = &d
	if d.Approved {
		c.Status = CallApproved
	} else {
		c.Status = CallRejected
		c.Output = "The user rejected this call."
		if d.Reason != "" {
			c.Output += " Reason: " + d.Reason
		}
		c.FinishedAt = d.At
	}
	if len(st.PendingApprovals()) == 0 {
		return st.resume(StatusAwaitingApproval, d.At)
	}
	return nil
}

// Respond resumes a run that awaits input. For ask_user the text is the answer to the
// model's question; for other pauses (stuck, failures, sanity, model errors) it is an
// optional instruction; empty text means go on, and the model is told what its state calls
// for (continuation.go).
func (st *State) Respond(text, from string) error {
	if st.Status != StatusAwaitingInput || st.Pause == nil {
		return fmt.Errorf("respond: %w", ErrNotPending)
	}
	if st.Pause.Step != "" {
		return st.respondForStep(text, from)
	}
	if st.Pause.Kind == PauseAskUser {
		c := st.Call(st.Pause.CallID)
		if c == nil || c.Status != CallAwaitingInput {
			return fmt.Errorf("respond to ask_user: %w", ErrNotPending)
		}
		c.Status = CallSucceeded
		c.Output = "The user (" + from + ") answered: " + text
	} else {
		msg := st.nudge(st.Pause)
		if strings.TrimSpace(text) != "" {
			msg = "The user (" + from + ") says: " + text
		}
		if st.Pause.Kind == PauseQuestion && strings.TrimSpace(text) != "" {
			msg = "The user (" + from + ") answered: " + text
		}
		if st.Pause.Kind != PausePerson {
			// A person's go-ahead after the loop stopped itself starts its counts afresh,
			// with full momentum; a pause a person asked for changed nothing they measure.
			st.ConsecutiveFailures = 0
			st.RepeatedCall, st.RepeatedError, st.Recent = Streak{}, Streak{}, nil
			st.Momentum = Momentum{}
			st.ProgressAt = st.Step
		}
		if msg != "" {
			st.Messages = append(st.Messages, Message{Role: RoleUser, Content: msg})
		}
	}
	return st.resume(StatusAwaitingInput, time.Time{})
}

// Cancel ends a run that is not over yet. Calls that waited for a decision are rejected.
func (st *State) Cancel(reason string, now time.Time) error {
	if st.Status.Terminal() {
		return fmt.Errorf("%w: cannot cancel a %s run", ErrTransition, st.Status)
	}
	for i := range st.Calls {
		c := &st.Calls[i]
		if c.Status == CallAwaitingApproval || c.Status == CallAwaitingInput || c.Status == CallReady || c.Status == CallApproved {
			c.Status, c.Output, c.FinishedAt = CallRejected, "The run was cancelled.", now.UTC()
		}
		if c.Status == CallStarted {
			c.Status, c.Error, c.FinishedAt = CallUnknown, "outcome unknown: the run was cancelled while this call ran", now.UTC()
		}
	}
	if err := st.move("cancel", StatusCancelled, now, StatusQueued, StatusRunning, StatusAwaitingApproval, StatusAwaitingInput); err != nil {
		return err
	}
	st.cancelSteps(reason, now)
	st.Pause = nil
	if reason == "" {
		reason = "cancelled"
	}
	st.Error = reason
	return nil
}

// Progress is what a status card shows about a run.
func (st *State) Progress() Progress {
	p := Progress{
		RunID:   st.RunID,
		Goal:    st.Goal,
		Status:  st.Status,
		Step:    st.Step,
		Plan:    append([]PlanItem(nil), st.Plan...),
		Usage:   st.Usage,
		Elapsed: st.Active,
	}
	for i := len(st.Plan) - 1; i >= 0; i-- {
		if st.Plan[i].Status == PlanInProgress {
			p.Current = st.Plan[i].Step
			break
		}
	}
	if p.Current == "" && len(st.Calls) > 0 {
		last := st.Calls[len(st.Calls)-1]
		p.Current = last.Name
	}
	return p
}

// Summary says in a few lines what was done and what was not: the plan with its marks, and
// counts of tool calls by outcome. Failure and budget messages are built from it.
func (st *State) Summary() string {
	var b strings.Builder
	if len(st.Plan) > 0 {
		var done, open []string
		for _, it := range st.Plan {
			if it.Status == PlanDone {
				done = append(done, it.Step)
			} else {
				open = append(open, it.Step+" ("+string(it.Status)+")")
			}
		}
		if len(done) > 0 {
			fmt.Fprintf(&b, "Done: %s.\n", strings.Join(done, "; "))
		}
		if len(open) > 0 {
			fmt.Fprintf(&b, "Not done: %s.\n", strings.Join(open, "; "))
		}
	}
	counts := map[CallStatus]int{}
	for _, c := range st.Calls {
		counts[c.Status]++
	}
	fmt.Fprintf(&b, "%s, %s (%d succeeded, %d failed, %d rejected).",
		count(st.Step, "step"), count(len(st.Calls), "tool call"), counts[CallSucceeded], counts[CallFailed]+counts[CallInvalid]+counts[CallUnknown], counts[CallRejected])
	if f := st.lastFailure(); f != "" {
		b.WriteString("\n" + f)
	}
	return b.String()
}

// HashArgs is the hash an approval binds: the tool name and its exact arguments.
func HashArgs(name, args string) string {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(args))
	return hex.EncodeToString(h.Sum(nil))
}

// Progress is a snapshot of a run for rendering.
type Progress struct {
	RunID   string
	Goal    string
	Status  Status
	Step    int
	Plan    []PlanItem
	Current string
	Usage   Usage
	Elapsed time.Duration
}
