package agent

import "time"

// MessageType is the kind of one message between the planner and an executor (seed 001).
type MessageType string

// The message types of the planner-executor conversation.
const (
	// MsgTaskAssignment: the planner gives an executor its step (again, with guidance, on a
	// retry).
	MsgTaskAssignment MessageType = "task_assignment"
	// MsgQuestion: an executor asks the planner, or the planner passes a question on to the
	// person.
	MsgQuestion MessageType = "question"
	// MsgClarification: the planner's (or the person's) answer to a question.
	MsgClarification MessageType = "clarification"
	// MsgProgressUpdate: where a step is (waiting for approval, resumed) and the planner's
	// verdicts on results.
	MsgProgressUpdate MessageType = "progress_update"
	// MsgPartialResult: what an executor had when it stopped short (a spent budget).
	MsgPartialResult MessageType = "partial_result"
	// MsgTaskComplete: an executor's result.
	MsgTaskComplete MessageType = "task_complete"
	// MsgError: an executor failed.
	MsgError MessageType = "error"
)

// The planner's verdicts on an executor's result (observer.go).
const (
	VerdictAccept = "accept"
	VerdictRetry  = "retry"
	VerdictRevise = "revise"
)

// PlanMessage is one message of the planner-executor conversation, kept in the run's State.
type PlanMessage struct {
	Seq  int         `json:"seq"`
	Type MessageType `json:"type"`
	// From and To are "planner", "executor <step>" or "person <name>".
	From string `json:"from"`
	To   string `json:"to"`
	Step string `json:"step,omitempty"`
	Text string `json:"text"`
	// Verdict and Reason record the planner's review of a result.
	Verdict string    `json:"verdict,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at,omitzero"`
}

// planner is the name of the planner in the conversation.
const planner = "planner"

func executorName(step string) string { return "executor " + step }

// say appends a message to the conversation.
func (p *Planning) say(m PlanMessage) {
	m.Seq = len(p.Conversation) + 1
	m.Text = truncate(m.Text, 4000)
	p.Conversation = append(p.Conversation, m)
}

// LastQuestion returns the latest question of an executor and the answer it got, if any.
func (p *Planning) LastQuestion() (q, a *PlanMessage) {
	if p == nil {
		return nil, nil
	}
	for i := len(p.Conversation) - 1; i >= 0; i-- {
		m := &p.Conversation[i]
		if m.Type != MsgQuestion || m.From == planner {
			continue
		}
		for j := i + 1; j < len(p.Conversation); j++ {
			if n := &p.Conversation[j]; n.Type == MsgClarification && n.Step == m.Step {
				return m, n
			}
		}
		return m, nil
	}
	return nil, nil
}
