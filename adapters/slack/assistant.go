package slack

import (
	"github.com/slack-go/slack"

	"github.com/loopbot/loopbot/bot"
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
