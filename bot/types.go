package bot

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ThreadRef names one conversation thread on one platform. Slack: channel + thread_ts;
// Discord: the thread channel (Channel is the parent, Thread the thread's channel ID); web:
// the console's thread ID.
type ThreadRef struct {
	Platform  string `json:"platform"`
	Workspace string `json:"workspace,omitempty"`
	Channel   string `json:"channel"`
	Thread    string `json:"thread"`
}

// Key is a stable string for the thread, used as a storage key.
func (t ThreadRef) Key() string {
	return t.Platform + "/" + t.Workspace + "/" + t.Channel + "/" + t.Thread
}

// ChannelKey names the channel the thread is in, across threads: channel grants are kept
// under it.
func (t ThreadRef) ChannelKey() string {
	return t.Platform + "/" + t.Workspace + "/" + t.Channel
}

// Valid reports whether the reference names a thread.
func (t ThreadRef) Valid() bool { return t.Platform != "" && t.Channel != "" && t.Thread != "" }

// MessageRef names one posted message, so it can be edited later.
type MessageRef struct {
	Thread ThreadRef `json:"thread"`
	ID     string    `json:"id"`
}

// User is a person (or bot) on a platform.
type User struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Bot is set for bot accounts; their messages are ignored.
	Bot bool `json:"bot,omitempty"`
}

// EventKind says what happened on a platform.
type EventKind string

// Inbound event kinds.
const (
	// EventMention: the bot was mentioned with a goal; it starts a run in Thread.
	EventMention EventKind = "mention"
	// EventReply: a message in a thread; it continues the conversation or answers a
	// question. The bot ignores it in a thread it has no conversation in, unless the event is
	// Direct.
	EventReply EventKind = "reply"
	// EventCommand: a command such as /loopbot; Command says which.
	EventCommand EventKind = "command"
	// EventAction: a button was pressed; ActionID is the button's opaque ID.
	EventAction EventKind = "action"
)

// Commands an EventCommand can carry.
const (
	CommandStart  = "start"
	CommandStatus = "status"
	CommandCancel = "cancel"
)

// Event is a platform-neutral inbound event. Adapters decode platform payloads into it.
type Event struct {
	Kind EventKind `json:"kind"`
	// ID is the platform's unique ID for the delivery (Slack event_id, Discord interaction
	// ID); the same ID delivered twice is handled once.
	ID     string    `json:"id"`
	Thread ThreadRef `json:"thread"`
	User   User      `json:"user"`
	Text   string    `json:"text,omitempty"`
	// Command is set on EventCommand.
	Command string `json:"command,omitempty"`
	// ActionID is set on EventAction; Text then holds what the clicker typed in the
	// button's reason field (Button.Reason), if anything.
	ActionID string    `json:"action_id,omitempty"`
	At       time.Time `json:"at,omitzero"`
	// History is what the thread held before this event, oldest first, when the adapter
	// fetched it: a mention in the middle of a thread the bot is new to. A run started by
	// the event sees it; it is outside content, and is marked so in the prompt.
	// It is a pointer so that Event stays comparable.
	History *History `json:"history,omitempty"`
	// Direct marks a message in a direct conversation with the bot, where every message is
	// for the bot: a reply there starts a run even in a thread the bot has no conversation
	// in yet.
	Direct bool `json:"direct,omitempty"`
}

// History is a thread's earlier messages, oldest first.
type History struct {
	Messages []HistoryMessage `json:"messages"`
}

// HistoryMessage is one earlier message of a thread.
type HistoryMessage struct {
	// Name is who wrote it, as the platform shows them.
	Name string `json:"name,omitempty"`
	// Bot is set for the bot's own messages.
	Bot  bool   `json:"bot,omitempty"`
	Text string `json:"text"`
}

// Bounds of Event.History: adapters fetch no more, and the bot keeps the newest messages
// within them.
const (
	MaxHistoryMessages = 50
	MaxHistoryBytes    = 16 << 10
)

// Validate reports what is missing from an event an adapter produced.
func (e Event) Validate() error {
	switch {
	case e.ID == "":
		return errors.New("event has no id")
	case !e.Thread.Valid():
		return fmt.Errorf("event %s has no thread", e.ID)
	case e.User.ID == "":
		return fmt.Errorf("event %s has no user", e.ID)
	}
	switch e.Kind {
	case EventMention, EventReply:
	case EventCommand:
		if e.Command != CommandStart && e.Command != CommandStatus && e.Command != CommandCancel && e.Command != CommandAutonomy &&
			e.Command != CommandGrants {
			return fmt.Errorf("event %s: unknown command %q", e.ID, e.Command)
		}
	case EventAction:
		if e.ActionID == "" {
			return fmt.Errorf("event %s: action without an action id", e.ID)
		}
	default:
		return fmt.Errorf("event %s: unknown kind %q", e.ID, e.Kind)
	}
	return nil
}

// Result is what Handle tells the adapter to say back at once.
type Result struct {
	// Notice, if set, goes to the acting user only (ephemeral), e.g. why a click changed
	// nothing.
	Notice string
	// RunID is the run the event started or continued, if any.
	RunID string
	// Duplicate is set when the event was handled before.
	Duplicate bool
}

// MessageKind tells an adapter what a Message is for, so it can render each kind its way.
type MessageKind string

// Outbound message kinds.
const (
	KindStatus   MessageKind = "status"
	KindApproval MessageKind = "approval"
	KindAnswer   MessageKind = "answer"
	KindFailure  MessageKind = "failure"
	KindQuestion MessageKind = "question"
	KindNotice   MessageKind = "notice"
	// KindGrants lists a channel's grants with Revoke buttons (grants.go).
	KindGrants MessageKind = "grants"
)

// Message is the platform-neutral outbound message every adapter renders: Block Kit on
// Slack, embeds and components on Discord, HTML on the web console.
type Message struct {
	Kind  MessageKind `json:"kind"`
	Title string      `json:"title,omitempty"`
	// Text is Markdown written by the model or the bot. Adapters escape it for their
	// platform so it cannot ping anyone or break formatting.
	Text    string     `json:"text,omitempty"`
	Plan    []PlanLine `json:"plan,omitempty"`
	Fields  []Field    `json:"fields,omitempty"`
	Buttons []Button   `json:"buttons,omitempty"`
	// Footer is a short context line (step, elapsed, tokens, cost).
	Footer string `json:"footer,omitempty"`
	// Working marks the status card of a run that is working, and Activity says on what
	// when the plan tells: a platform with a thread status of its own (Slack's assistant
	// threads) shows them there too.
	Working  bool   `json:"working,omitempty"`
	Activity string `json:"activity,omitempty"`
	// Steps are the run's tool calls, newest last (steps.go); EarlierSteps counts older
	// ones left out.
	Steps        []Step `json:"steps,omitempty"`
	EarlierSteps int    `json:"earlier_steps,omitempty"`
	// Files are the workspace files the run wrote (paths relative to its workspace), and
	// Workspace the run whose workspace holds them, for an adapter that can link them; the
	// Footer names them in words for the others.
	Files     []string `json:"files,omitempty"`
	Workspace string   `json:"workspace,omitempty"`
}

// PlanLine is one item of a run's checklist.
type PlanLine struct {
	Text   string `json:"text"`
	Status string `json:"status"` // pending, in_progress, done, failed
}

// Field is a labelled value, e.g. a tool argument on an approval card.
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Code asks for a monospace rendering.
	Code bool `json:"code,omitempty"`
}

// ButtonStyle is how a button looks.
type ButtonStyle string

// Button styles.
const (
	StyleDefault ButtonStyle = ""
	StylePrimary ButtonStyle = "primary"
	StyleDanger  ButtonStyle = "danger"
)

// Button is a clickable action. ID is opaque: the server holds what it binds, so a forged or
// altered ID finds nothing.
type Button struct {
	ID    string      `json:"id"`
	Label string      `json:"label"`
	Style ButtonStyle `json:"style,omitempty"`
	// Confirm, if set, asks the clicker to confirm first (dangerous calls).
	Confirm string `json:"confirm,omitempty"`
	// Feedback marks a rating button of an answer (FeedbackUp or FeedbackDown), which a
	// platform with a rating control of its own (Slack's feedback buttons) draws as that.
	Feedback FeedbackValue `json:"feedback,omitempty"`
	// Reason, if set, is the label of a text field an adapter that can opens before it
	// sends the click (a Slack or Discord modal, a field in the console); what is typed
	// comes back as the click's Event.Text. A platform that cannot ask sends the plain click.
	Reason string `json:"reason,omitempty"`
}

// Platform is what the bot needs from a chat platform adapter.
type Platform interface {
	// Name is the platform name used in ThreadRef.Platform.
	Name() string
	// Post adds a message to a thread.
	Post(ctx context.Context, thread ThreadRef, msg Message) (MessageRef, error)
	// Update replaces a posted message.
	Update(ctx context.Context, ref MessageRef, msg Message) error
	// Notify shows text to one user only (ephemeral), in or near the thread.
	Notify(ctx context.Context, thread ThreadRef, userID, text string) error
}

// RateLimitError is what a Platform returns when the platform asks it to slow down. The bot
// waits RetryAfter before it calls that channel again.
type RateLimitError struct {
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("rate limited: retry after %s", e.RetryAfter)
}

// PermanentError marks a platform failure that retrying cannot fix (a deleted channel, a
// missing permission): the bot logs it and moves on.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }
