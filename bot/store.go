package bot

import (
	"context"
	"errors"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// ErrNotFound is returned by Tx getters for a key that is not stored.
var ErrNotFound = errors.New("not found")

// Store keeps everything the bot must not lose: conversations, runs with their agent state,
// approvals, button bindings, the dedupe index, the audit log and the outbox. The bbolt
// implementation lives in package store; storetest holds the conformance suite every
// implementation passes.
//
// Transactions are closures, as in bbolt: Update runs fn in one serialisable read-write
// transaction and commits it if fn returns nil, so a read-check-write inside fn is a
// compare-and-set. fn must not do network I/O and must not keep tx after it returns. fn may
// be called more than once for one Update (an implementation may commit the writes of
// several callers together and run them again when one of them fails), so whatever it sets
// outside tx it must set afresh on every call.
type Store interface {
	Update(ctx context.Context, fn func(tx Tx) error) error
	View(ctx context.Context, fn func(tx Tx) error) error
	// ClaimEvent records an inbound delivery ID and reports whether it is the first delivery
	// seen within ttl. Claims outlive a restart.
	ClaimEvent(ctx context.Context, id string, now time.Time, ttl time.Duration) (first bool, err error)
	// PurgeEvents forgets event claims that expired before now.
	PurgeEvents(ctx context.Context, now time.Time) (int, error)
	Close() error
}

// Tx is one transaction of a Store. Getters return ErrNotFound for missing keys; the values
// they return are copies the caller may change and put back.
type Tx interface {
	Run(id string) (*RunRecord, error)
	// RunHeader returns run id without its State, which is most of a stored run: for a
	// caller that decides on the record's other fields and has the state already, or needs
	// none. Putting the result back stores a run without a state.
	RunHeader(id string) (*RunRecord, error)
	// RunBrief returns run id with its state but without State.Messages, the conversation
	// with the model, which is most of a long run and which no card shows: for rendering.
	RunBrief(id string) (*RunRecord, error)
	PutRun(r *RunRecord) error
	// PutRunHead stores the fields of a run that are not its state (its card, its buttons,
	// UpdatedAt) and keeps the stored state and status as they are: a card's reference is
	// saved without writing the run's state again. r.State must be nil; the run must exist.
	PutRunHead(r *RunRecord) error
	// Runs lists runs in creation order, filtered. A filter on Statuses reads only the
	// runs of those statuses, however many others are stored.
	Runs(f RunFilter) ([]*RunRecord, error)
	// RunIDs lists the IDs of the runs Runs lists, in the same order, without loading the
	// runs: a filter on Statuses alone is answered from the store's index.
	RunIDs(f RunFilter) ([]string, error)

	Conversation(thread ThreadRef) (*Conversation, error)
	PutConversation(c *Conversation) error

	Approval(id string) (*Approval, error)
	PutApproval(a *Approval) error
	// Approvals lists approvals of one run, or all pending ones when runID is empty.
	Approvals(runID string) ([]*Approval, error)

	Action(id string) (*Action, error)
	PutAction(a *Action) error

	// PutFeedback stores one person's rating of one run's answer, replacing the rating
	// they gave it before: there is one per person (User.ID) per run.
	PutFeedback(f *Feedback) error
	// Feedback lists the ratings of one run's answer, or of every run when runID is empty.
	Feedback(runID string) ([]*Feedback, error)

	// ClaimEvent is Store.ClaimEvent inside the transaction: the claim commits together
	// with what the transaction does about the event, so a failure loses neither.
	ClaimEvent(id string, now time.Time, ttl time.Duration) (first bool, err error)

	// ChannelAutonomy returns the autonomy level set for thread's channel (bot/autonomy.go).
	ChannelAutonomy(thread ThreadRef) (*ChannelAutonomy, error)
	PutChannelAutonomy(c *ChannelAutonomy) error

	AppendAudit(e AuditEntry) error
	// Audit lists the audit entries of one run, or all when runID is empty, oldest first.
	Audit(runID string) ([]AuditEntry, error)

	// PutGrant stores a channel grant; Grant returns one by ID; Grants lists the grants of
	// one channel (ThreadRef.ChannelKey), oldest first; DeleteGrant removes one (a revoke).
	PutGrant(g *ChannelGrant) error
	Grant(id string) (*ChannelGrant, error)
	Grants(channel string) ([]*ChannelGrant, error)
	DeleteGrant(id string) error
	// Memory lists the facts kept for a channel (ChannelKey), oldest first; MemoryFact
	// returns one; PutMemory stores one under its channel and ID; DeleteMemory forgets one
	// (a missing one is not an error).
	Memory(channel string) ([]*MemoryFact, error)
	MemoryFact(channel, id string) (*MemoryFact, error)
	PutMemory(f *MemoryFact) error
	DeleteMemory(channel, id string) error

	// AddInbox stores an accepted event under its ID unless one with that ID is waiting
	// already, and reports whether it added it. Inbox lists the waiting events in the order
	// of their Seq; DeleteInbox removes one (a missing one is not an error).
	AddInbox(e *InboxEntry) (added bool, err error)
	Inbox() ([]*InboxEntry, error)
	DeleteInbox(id string) error

	// RunLease is Leaser.Lease inside the transaction: the run's lease as stored, which a
	// replica reads to tell whether the one that asked a question still works on its run
	// (ask.go). It wraps ErrNotFound for a run never claimed, and locks nothing.
	RunLease(runID string) (Lease, error)

	// PutOutbox stores an item under its Key, replacing an older item with the same key:
	// that is how status card edits coalesce.
	PutOutbox(item OutboxItem) error
	Outbox() ([]OutboxItem, error)
	DeleteOutbox(key string) error
}

// OutboxAppender is a Tx that lists the outbox into a slice its caller reuses: during a
// burst the dispatcher lists a thousand items at every pass, a new slice of them each time
// otherwise.
type OutboxAppender interface {
	// AppendOutbox appends the items Outbox would return to dst and returns the result.
	AppendOutbox(dst []OutboxItem) ([]OutboxItem, error)
}

// RunFilter selects runs. Zero fields match everything.
type RunFilter struct {
	Statuses []agent.Status
	Thread   *ThreadRef
	Limit    int
}

// RunRecord is one run as stored: where it lives, who asked, and the agent state.
type RunRecord struct {
	ID        string       `json:"id"`
	Thread    ThreadRef    `json:"thread"`
	Requester User         `json:"requester"`
	Status    agent.Status `json:"status"`
	State     *agent.State `json:"state"`
	// Card is the status card once it has been posted.
	Card MessageRef `json:"card,omitzero"`
	// CancelAction is the opaque ID of the card's Cancel button; ContinueAction and
	// StopAction those of a paused run's Continue and Stop buttons.
	CancelAction   string `json:"cancel_action,omitempty"`
	ContinueAction string `json:"continue_action,omitempty"`
	StopAction     string `json:"stop_action,omitempty"`
	// Asking names who asks the question a call of the run waits on (Conversation.Asking),
	// for the status card, while it waits.
	Asking string `json:"asking,omitempty"`
	// FeedbackUpAction and FeedbackDownAction are the opaque IDs of the answer's rating
	// buttons, made when the run completes.
	FeedbackUpAction   string `json:"feedback_up_action,omitempty"`
	FeedbackDownAction string `json:"feedback_down_action,omitempty"`
	// PauseAction is the opaque ID of the card's Pause button; PauseBy names who asked the
	// run to pause, until the loop has paused it (pause.go).
	PauseAction string `json:"pause_action,omitempty"`
	PauseBy     string `json:"pause_by,omitempty"`
	// SaveAction is the opaque ID of a completed run's Save as playbook button.
	SaveAction string `json:"save_action,omitempty"`
	// ReviewsPosted counts the state's sanity reviews already posted to the thread.
	ReviewsPosted int `json:"reviews_posted,omitempty"`
	// Playbook is the playbook the run was started from, if any.
	Playbook  string    `json:"playbook,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	// Encoded, when set, is State as a StateEncoder encoded it before the transaction that
	// puts the run: a store that made it writes those bytes instead of encoding State again
	// while it holds its write lock. It is never stored, and a store ignores one that is not
	// its own or not of this State.
	Encoded EncodedState `json:"-"`
}

// StateEncoder is a Store that can encode a run's state ahead of the transaction that
// stores it. A store with one writer (bbolt) runs the transactions of every run one after
// another; a run's goroutine that encodes its own state first leaves the writer nothing to
// do for it but compare and copy bytes.
type StateEncoder interface {
	// EncodeState encodes st for a PutRun of a record whose State is st. st must not change
	// until that PutRun: the store checks only the cheap signs of a change (the step, the
	// status, the lengths of the lists, the update time) and encodes afresh when one differs.
	EncodeState(st *agent.State) (EncodedState, error)
}

// EncodedState is a state encoded by a StateEncoder.
type EncodedState interface {
	// Of is the state that was encoded.
	Of() *agent.State
}

// Conversation is a thread as the bot knows it: its runs in order, the active one, and the
// goals queued behind it.
type Conversation struct {
	Thread ThreadRef    `json:"thread"`
	Runs   []string     `json:"runs,omitempty"`
	Active string       `json:"active,omitempty"`
	Queue  []QueuedGoal `json:"queue,omitempty"`
	// Notes are what people said to the active run while it worked, kept until its state
	// shows it took them (steering); NoteSeq numbers them.
	Notes   []RunNote `json:"notes,omitempty"`
	NoteSeq int       `json:"note_seq,omitempty"`
	// Asking is the question a tool of the active run waits on (an MCP server's
	// elicitation), until it is answered or closed (ask.go).
	Asking *PendingQuestion `json:"asking,omitempty"`
	// Asked are the latest closed questions, kept for their cards' edits.
	Asked []*PendingQuestion `json:"asked,omitempty"`
}

// RunNote is one thing a person said to a working run.
type RunNote struct {
	Seq   int       `json:"seq"`
	RunID string    `json:"run_id"`
	From  string    `json:"from"`
	Text  string    `json:"text"`
	At    time.Time `json:"at"`
	// Sanity asks the run for a sanity check instead of saying Text to the model.
	Sanity bool `json:"sanity,omitempty"`
}

// QueuedGoal is a goal that arrived while the thread's run was busy.
type QueuedGoal struct {
	EventID string    `json:"event_id"`
	User    User      `json:"user"`
	Text    string    `json:"text"`
	At      time.Time `json:"at"`
}

// ApprovalStatus is where an approval request is.
type ApprovalStatus string

// Approval statuses. Only pending changes, and only once.
const (
	ApprovalPending   ApprovalStatus = "pending"
	ApprovalApproved  ApprovalStatus = "approved"
	ApprovalRejected  ApprovalStatus = "rejected"
	ApprovalExpired   ApprovalStatus = "expired"
	ApprovalCancelled ApprovalStatus = "cancelled"
)

// Approval binds an approval request to exactly one tool call: the run, the call and the hash
// of its arguments. Buttons carry only the opaque IDs of its actions.
type Approval struct {
	ID            string     `json:"id"`
	RunID         string     `json:"run_id"`
	CallID        string     `json:"call_id"`
	Tool          string     `json:"tool"`
	ArgsHash      string     `json:"args_hash"`
	Risk          agent.Risk `json:"risk"`
	Thread        ThreadRef  `json:"thread"`
	Requester     User       `json:"requester"`
	ApproveAction string     `json:"approve_action"`
	RejectAction  string     `json:"reject_action"`
	// The actions of the grant buttons and of Reject and stop; the grant buttons are
	// empty for a dangerous call, which is approved once or not at all. Pattern is the
	// argument pattern Always allow here grants, as the card shows it; empty when the call
	// has none, and then there is no Always button.
	RunGrantAction   string `json:"run_grant_action,omitempty"`
	AlwaysAction     string `json:"always_action,omitempty"`
	RejectStopAction string `json:"reject_stop_action,omitempty"`
	Pattern          string `json:"pattern,omitempty"`
	// FlowHeld marks a call the data-flow guard held, approved once only like a dangerous
	// one (agent.CallRecord.FlowHeld).
	FlowHeld bool `json:"flow_held,omitempty"`
	// Granted is the scope of the grant the approval made, if any.
	Granted   agent.GrantScope `json:"granted,omitempty"`
	Status    ApprovalStatus   `json:"status"`
	DecidedBy User             `json:"decided_by,omitzero"`
	DecidedAt time.Time        `json:"decided_at,omitzero"`
	Reason    string           `json:"reason,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
	ExpiresAt time.Time        `json:"expires_at"`
	Card      MessageRef       `json:"card,omitzero"`
}

// ActionKind is what a button does.
type ActionKind string

// Button actions.
const (
	ActionApprove  ActionKind = "approve"
	ActionReject   ActionKind = "reject"
	ActionCancel   ActionKind = "cancel"
	ActionContinue ActionKind = "continue"
	ActionStop     ActionKind = "stop"
	// ActionFeedback rates a run's answer; the action's Feedback says how.
	ActionFeedback ActionKind = "feedback"
	// ActionAnswer answers a tool's question with the action's Answer; ActionSkip skips an
	// optional one and ActionDecline declines it.
	ActionAnswer  ActionKind = "answer"
	ActionSkip    ActionKind = "skip"
	ActionDecline ActionKind = "decline"
	// ActionApproveRun approves the call and grants its tool for the rest of the run;
	// ActionApproveAlways approves it and grants the tool and the call's pattern in the
	// channel (approvers only); ActionRejectStop rejects it and ends the run; ActionRevoke
	// removes a channel grant (grants.go).
	ActionApproveRun    ActionKind = "approve_run"
	ActionApproveAlways ActionKind = "approve_always"
	ActionRejectStop    ActionKind = "reject_stop"
	ActionRevoke        ActionKind = "revoke"
	// ActionPause asks a working run to pause at its next step boundary (pause.go).
	ActionPause ActionKind = "pause"
	// ActionSavePlaybook saves a completed run as a draft playbook.
	ActionSavePlaybook ActionKind = "save_playbook"
	// ActionForget forgets one fact of a channel's memory.
	ActionForget ActionKind = "forget"
)

// Action is what an opaque button ID stands for.
type Action struct {
	ID         string     `json:"id"`
	Kind       ActionKind `json:"kind"`
	RunID      string     `json:"run_id"`
	ApprovalID string     `json:"approval_id,omitempty"`
	// Feedback is the rating an ActionFeedback gives.
	Feedback FeedbackValue `json:"feedback,omitempty"`
	// Question is the ID of the question an ActionAnswer, ActionSkip or ActionDecline
	// answers, and Answer the option an ActionAnswer chooses.
	Question string `json:"question,omitempty"`
	Answer   string `json:"answer,omitempty"`
	// GrantID is the channel grant a Revoke button removes.
	GrantID string `json:"grant_id,omitempty"`
	// Channel and Fact name the memory fact of a Forget button; Listing is the outbox key of
	// the memory list it is on, Siblings the IDs of all that list's buttons, and Card the
	// list once posted, so that a Forget edits the list in place.
	Channel  string     `json:"channel,omitempty"`
	Fact     string     `json:"fact,omitempty"`
	Listing  string     `json:"listing,omitempty"`
	Siblings []string   `json:"siblings,omitempty"`
	Card     MessageRef `json:"card,omitzero"`
}

// AuditEntry records a decision: who, what, when, and the hash of the arguments decided on.
type AuditEntry struct {
	At         time.Time `json:"at"`
	Actor      User      `json:"actor"`
	Action     string    `json:"action"`
	RunID      string    `json:"run_id"`
	ApprovalID string    `json:"approval_id,omitempty"`
	CallID     string    `json:"call_id,omitempty"`
	Tool       string    `json:"tool,omitempty"`
	ArgsHash   string    `json:"args_hash,omitempty"`
	Detail     string    `json:"detail,omitempty"`
}

// OutboxKind says what an outbox item will post or edit.
type OutboxKind string

// Outbox item kinds. The message is rendered from the stored records when the item is sent,
// so an item that waited shows the latest state.
const (
	OutboxCard         OutboxKind = "card"          // post or edit the run's status card
	OutboxApprovalCard OutboxKind = "approval_card" // post or edit an approval card
	OutboxAnswer       OutboxKind = "answer"        // post the final answer
	OutboxFailure      OutboxKind = "failure"       // post a failure or budget summary
	OutboxQuestion     OutboxKind = "question"      // post a question or pause notice
	OutboxNotice       OutboxKind = "notice"        // post Text to the thread
	OutboxAsk          OutboxKind = "ask"           // post a tool's question (Conversation.Asking)
	OutboxGrants       OutboxKind = "grants"        // post the grants of the channel Text names
	OutboxMemory       OutboxKind = "memory"        // post a channel's memory with Forget buttons
)

// OutboxItem is a record of something to post, written in the same transaction as the state
// change that calls for it.
type OutboxItem struct {
	Key        string     `json:"key"`
	Kind       OutboxKind `json:"kind"`
	RunID      string     `json:"run_id,omitempty"`
	ApprovalID string     `json:"approval_id,omitempty"`
	Thread     ThreadRef  `json:"thread"`
	Text       string     `json:"text,omitempty"`
	// Actions are the opaque IDs of the buttons a memory listing shows, one a fact.
	Actions   []string  `json:"actions,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Attempts  int       `json:"attempts,omitempty"`
	// Sending is written before a new post is made (outbox_intent.go).
	Sending *Sending `json:"sending,omitempty"`
}
