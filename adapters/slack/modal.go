package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// A button that asks for a reason (bot.Button.Reason: Reject, Reject and stop) is drawn with
// an action_id that says so. Its click opens a modal with one text field (views.open, with
// the click's trigger_id); the modal's submission (a view_submission, over HTTP or Socket
// Mode) is the click, with what was typed as the event's Text. The modal carries the button's
// opaque ID and its thread in private_metadata, which Slack keeps from the person and returns
// as it was set; the bot still checks the thread and who clicked, as for any click. When the
// modal cannot be opened (no trigger_id, an API error), the click counts without a reason.

// reasonPrefix marks the buttons that ask for a reason; it starts with actionPrefix, so a
// click on one decodes as any loopbot click does.
const reasonPrefix = actionPrefix + "reason_"

// reasonActionID names the i-th button of a message that asks for a reason.
func reasonActionID(i int) string { return fmt.Sprintf("%s%d", reasonPrefix, i) }

// Names in the reason modal.
const (
	reasonCallback = "loopbot_reason"
	reasonBlock    = "reason"
	reasonInput    = "reason"
	// maxModalTitle and maxModalSubmit are Slack's limits on a modal's title and submit
	// label; maxModalMetadata on private_metadata; maxReasonInput what the field takes.
	maxModalTitle    = 24
	maxModalSubmit   = 24
	maxModalMetadata = 3000
	maxReasonInput   = 1000
)

// reasonMeta is what a reason modal carries in private_metadata: the clicked button's opaque
// ID and the thread it was clicked in.
type reasonMeta struct {
	Action  string `json:"a"`
	Team    string `json:"w,omitempty"`
	Channel string `json:"c"`
	Thread  string `json:"t"`
}

// reasonClick is a click on a button that asks for a reason, with what the modal needs.
type reasonClick struct {
	TriggerID string
	Label     string // the button's label: the modal's title and submit
	Meta      reasonMeta
}

// askedReason reads a block_actions payload whose clicked button asks for a reason; ok is
// false for any other payload and for a click without a trigger_id, which cannot open one.
func askedReason(body []byte, ev bot.Event) (reasonClick, bool) {
	var in struct {
		TriggerID string `json:"trigger_id"`
		Actions   []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Text     struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"actions"`
	}
	if json.Unmarshal(body, &in) != nil || in.TriggerID == "" {
		return reasonClick{}, false
	}
	for _, a := range in.Actions {
		if a.Value == ev.ActionID && strings.HasPrefix(a.ActionID, reasonPrefix) {
			return reasonClick{TriggerID: in.TriggerID, Label: a.Text.Text, Meta: reasonMeta{
				Action: a.Value, Team: ev.Thread.Workspace, Channel: ev.Thread.Channel, Thread: ev.Thread.Thread}}, true
		}
	}
	return reasonClick{}, false
}

// reasonView is the modal that asks for a reason.
func reasonView(rc reasonClick) (slack.ModalViewRequest, error) {
	meta, err := json.Marshal(rc.Meta)
	if err != nil || len(meta) > maxModalMetadata {
		return slack.ModalViewRequest{}, errors.New("reason modal: metadata too long")
	}
	label := strings.TrimSpace(rc.Label)
	if label == "" {
		label = "Reject"
	}
	input := slack.NewPlainTextInputBlockElement(slack.NewTextBlockObject(slack.PlainTextType, "What should the run do instead?", false, false), reasonInput)
	input.Multiline = true
	input.MaxLength = maxReasonInput
	block := slack.NewInputBlock(reasonBlock, slack.NewTextBlockObject(slack.PlainTextType, bot.ReasonLabel, false, false), nil, input)
	block.Optional = true
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      reasonCallback,
		Title:           slack.NewTextBlockObject(slack.PlainTextType, text.ClipRunes(label, maxModalTitle), false, false),
		Submit:          slack.NewTextBlockObject(slack.PlainTextType, text.ClipRunes(label, maxModalSubmit), false, false),
		Close:           slack.NewTextBlockObject(slack.PlainTextType, "Cancel", false, false),
		PrivateMetadata: string(meta),
		Blocks:          slack.Blocks{BlockSet: []slack.Block{block}},
	}, nil
}

// openReason opens the reason modal of a click.
func (a *Adapter) openReason(ctx context.Context, rc reasonClick) error {
	view, err := reasonView(rc)
	if err != nil {
		return err
	}
	if _, err := a.api.OpenViewContext(ctx, rc.TriggerID, view); err != nil {
		return fmt.Errorf("views.open: %w", err)
	}
	return nil
}

// submission is the part of a view_submission payload loopbot reads.
type submission struct {
	Type string `json:"type"`
	actor
	View struct {
		ID              string `json:"id"`
		CallbackID      string `json:"callback_id"`
		PrivateMetadata string `json:"private_metadata"`
		State           struct {
			Values map[string]map[string]struct {
				Value *string `json:"value"`
			} `json:"values"`
		} `json:"state"`
	} `json:"view"`
}

// decodeSubmission reads the view_submission of a reason modal into the click it stands for,
// with the typed reason as Text; ok is false for any other view.
func decodeSubmission(body []byte) (bot.Event, bool, error) {
	var sub submission
	if err := json.Unmarshal(body, &sub); err != nil {
		return bot.Event{}, false, fmt.Errorf("decode view_submission: %w", err)
	}
	if sub.Type != "view_submission" || sub.View.CallbackID != reasonCallback {
		return bot.Event{}, false, nil
	}
	var meta reasonMeta
	if err := json.Unmarshal([]byte(sub.View.PrivateMetadata), &meta); err != nil {
		return bot.Event{}, false, fmt.Errorf("decode view_submission %s: metadata: %w", sub.View.ID, err)
	}
	if sub.View.ID == "" || sub.User.ID == "" || meta.Action == "" || meta.Channel == "" || meta.Thread == "" {
		return bot.Event{}, false, errors.New("decode view_submission: no view id, user, action or thread")
	}
	var reason string
	if v := sub.View.State.Values[reasonBlock][reasonInput].Value; v != nil {
		reason = strings.TrimSpace(*v)
	}
	team := meta.Team
	if team == "" {
		team = sub.Team.ID
	}
	return bot.Event{
		Kind: bot.EventAction,
		// A view is submitted once; a redelivery of its submission has the same view ID.
		ID:       "view:" + sub.View.ID,
		Thread:   bot.ThreadRef{Platform: platform, Workspace: team, Channel: meta.Channel, Thread: meta.Thread},
		User:     bot.User{ID: sub.User.ID, Name: firstOf(sub.User.Username, sub.User.Name)},
		ActionID: meta.Action,
		Text:     reason,
	}, true, nil
}
