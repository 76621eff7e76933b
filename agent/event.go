package agent

// EventKind names a transition of a run.
type EventKind string

// The events a run emits, in the order they can happen.
const (
	EventStepStarted       EventKind = "step_started"
	EventPlanUpdated       EventKind = "plan_updated"
	EventToolStarted       EventKind = "tool_started"
	EventToolFinished      EventKind = "tool_finished"
	EventApprovalRequested EventKind = "approval_requested"
	EventApprovalDecided   EventKind = "approval_decided"
	EventNote              EventKind = "note"
	EventBudgetWarning     EventKind = "budget_warning"
	EventPaused            EventKind = "paused"
	EventResumed           EventKind = "resumed"
	EventCompleted         EventKind = "completed"
	EventFailed            EventKind = "failed"
	EventCancelled         EventKind = "cancelled"
	EventBudgetExhausted   EventKind = "budget_exhausted"
)

// Event is one transition of a run, with a snapshot of its progress, so an observer can
// render it without knowing the loop's internals.
type Event struct {
	Kind     EventKind
	RunID    string
	Progress Progress
	// Call is the tool call the event is about, if any (a copy).
	Call *CallRecord
	// Pause is set on EventPaused.
	Pause *Pause
	// Text is a note, warning, answer or failure summary.
	Text string
}

// Observer receives a run's events. The loop calls it from the run's goroutine, in order; it
// must not block for long.
type Observer interface {
	Observe(ev Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe calls f.
func (f ObserverFunc) Observe(ev Event) { f(ev) }
