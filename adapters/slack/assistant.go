package slack

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/slack-go/slack"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// Slack's agent surfaces (Config.Assistant): an app with the Agents & AI Apps features gets
// its answers' ratings as Slack's own feedback buttons, its threads a status while a run
// works, and the split view's new threads suggested prompts. Elsewhere context_actions
// blocks are refused, so the plain Block Kit buttons stand in.

// feedbackActionID is the action_id of the feedback buttons element. It carries the prefix
// of loopbot's buttons, so a click decodes like any other: by the clicked button's value,
// which is the rating's opaque ID.
const feedbackActionID = actionPrefix + "feedback"

// feedbackBlock takes the rating buttons out of buttons and returns them as a context
// actions block with one feedback buttons element, and the buttons left. With no pair of
// ratings, it returns no block and buttons as they are.
func feedbackBlock(buttons []bot.Button) (slack.Block, []bot.Button) {
	var up, down *bot.Button
	var rest []bot.Button
	for i, b := range buttons {
		switch {
		case b.Feedback == bot.FeedbackUp && up == nil:
			up = &buttons[i]
		case b.Feedback == bot.FeedbackDown && down == nil:
			down = &buttons[i]
		default:
			rest = append(rest, b)
		}
	}
	if up == nil || down == nil || up.ID == "" || down.ID == "" || len(up.ID) > maxButtonValue || len(down.ID) > maxButtonValue {
		return nil, buttons
	}
	button := func(emoji, label, id string) *slack.FeedbackButton {
		return slack.NewFeedbackButton(slack.NewTextBlockObject(slack.PlainTextType, emoji, true, false), id).WithAccessibilityLabel(label)
	}
	el := slack.NewFeedbackButtonsBlockElement(feedbackActionID, button("👍", "Helpful", up.ID), button("👎", "Not helpful", down.ID))
	return slack.NewContextActionsBlock("loopbot_feedback", el), rest
}

// DefaultSuggestedPrompts are offered in a new assistant thread when Config.SuggestedPrompts
// is not set.
var DefaultSuggestedPrompts = []string{
	"What can you do here, and what needs someone's approval?",
	"Summarise this page for me: ",
	"Look through the workspace and tell me what is in it.",
}

// Slack's bounds on suggested prompts (assistant.threads.setSuggestedPrompts).
const (
	maxSuggestedPrompts = 4
	maxPromptTitle      = 75
	maxStatusActivity   = 100
)

// workingStatus is the thread status while a run works: Slack shows it after the app's name.
const workingStatus = "is working on your request..."

// threadStarted is the inner event of assistant_thread_started: a person opened a new thread
// in the app's assistant view.
type threadStarted struct {
	Type            string `json:"type"`
	AssistantThread struct {
		UserID    string `json:"user_id"`
		ChannelID string `json:"channel_id"`
		ThreadTS  string `json:"thread_ts"`
	} `json:"assistant_thread"`
}

// decodeThreadStarted reads an Events API callback that carries assistant_thread_started
// into the thread it names. ok is false for any other callback.
func decodeThreadStarted(body []byte) (eventID string, thread bot.ThreadRef, ok bool, err error) {
	var cb callback
	if err := json.Unmarshal(body, &cb); err != nil || cb.Type != "event_callback" {
		return "", bot.ThreadRef{}, false, nil
	}
	var ts threadStarted
	if err := json.Unmarshal(cb.Event, &ts); err != nil || ts.Type != "assistant_thread_started" {
		return "", bot.ThreadRef{}, false, nil
	}
	at := ts.AssistantThread
	if cb.EventID == "" || at.ChannelID == "" || at.ThreadTS == "" {
		return "", bot.ThreadRef{}, false, errors.New("decode assistant_thread_started: no event_id, channel or thread")
	}
	return cb.EventID, bot.ThreadRef{Platform: platform, Workspace: cb.installTeam(), Channel: at.ChannelID, Thread: at.ThreadTS}, true, nil
}

// suggestPrompts offers the configured prompts in a new assistant thread. It is best
// effort: a failure is logged, and the thread works without them.
func (a *Adapter) suggestPrompts(ctx context.Context, thread bot.ThreadRef) {
	params := slack.AssistantThreadsSetSuggestedPromptsParameters{ChannelID: thread.Channel, ThreadTS: thread.Thread}
	for _, p := range a.cfg.SuggestedPrompts {
		params.AddPrompt(text.ClipRunes(strings.TrimSpace(p), maxPromptTitle), p)
	}
	if len(params.Prompts) == 0 {
		return
	}
	if err := a.api.SetAssistantThreadsSuggestedPromptsContext(ctx, params); err != nil {
		a.log.Warn("slack: suggested prompts", "channel", thread.Channel, "thread", thread.Thread, "err", logSafe(err))
	}
}

// statuses remembers the status last set in each thread, so that a card edit that changes
// nothing the status shows makes no call. Its lock guards only the map.
type statuses struct {
	mu   sync.Mutex
	last map[string]string // thread key -> status and activity
}

// change records want as thread's status and reports whether it differs from the last.
func (s *statuses) change(thread bot.ThreadRef, want string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]string{}
	}
	if s.last[thread.Key()] == want {
		return false
	}
	if want == "" {
		delete(s.last, thread.Key())
	} else {
		s.last[thread.Key()] = want
	}
	return true
}

// forget drops what is known of thread's status: Slack clears it when the app posts in the
// thread.
func (s *statuses) forget(thread bot.ThreadRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, thread.Key())
}

// threadStatus shows a working run (a status card marked Working) as the thread's status,
// with its current step as the loading message, and clears the status once the run waits
// or ends. It is best effort and
// paced by the bot's card edits: a failure is logged, never returned.
func (a *Adapter) threadStatus(ctx context.Context, thread bot.ThreadRef, msg bot.Message) {
	// Only the status card says whether the run works; the other messages say nothing of it.
	if !a.cfg.Assistant || msg.Kind != bot.KindStatus {
		return
	}
	params := slack.AssistantThreadsSetStatusParameters{ChannelID: thread.Channel, ThreadTS: thread.Thread}
	if msg.Working {
		params.Status = workingStatus
		// Slack splits loading messages at commas.
		if act := strings.TrimSpace(strings.ReplaceAll(plain(msg.Activity), ",", " ")); act != "" {
			params.LoadingMessages = []string{text.ClipRunes(act, maxStatusActivity)}
		}
	}
	shown := ""
	if params.Status != "" {
		shown = params.Status + "\x00" + strings.Join(params.LoadingMessages, "")
	}
	if !a.status.change(thread, shown) {
		return
	}
	if err := a.api.SetAssistantThreadsStatusContext(ctx, params); err != nil {
		a.log.Warn("slack: thread status", "channel", thread.Channel, "thread", thread.Thread, "err", logSafe(err))
	}
}
