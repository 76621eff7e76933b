package slack

import (
	"errors"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// Slack's limits, from the Block Kit and chat.postMessage references. Lengths are in
// characters, counted after escaping.
const (
	maxSectionText   = 3000  // text of a section block
	maxFieldText     = 2000  // one field of a section block
	maxSectionFields = 10    // fields of one section block
	maxContextText   = 3000  // a text element of a context block
	maxHeaderText    = 150   // header block, plain text
	maxBlocks        = 50    // blocks of one message
	maxMessageText   = 40000 // the text argument of chat.postMessage
	maxButtonText    = 75    // a button's label
	maxActionID      = 255   // a button's action_id
	maxButtonValue   = 2000  // a button's value
	maxActionButtons = 25    // elements of one actions block
	maxConfirmTitle  = 100   // confirm dialog title
	maxConfirmText   = 300   // confirm dialog text
	maxConfirmButton = 30    // confirm dialog button labels
)

// Layout budgets chosen below the limits so that any Message fits: a message carries at
// most textSections sections of body text (39,000 characters with the header, under the
// 40,000 of its fallback text), one plan section, maxFieldBlocks field blocks, a context
// and an actions block: at most 1+13+1+10+1+1 = 27 blocks, well under 50.
const (
	textSections   = 13
	maxFieldBlocks = 10
	maxPlanLine    = 300
)

// payload is one Slack message: its blocks and the plain-text fallback Slack shows in
// notifications and to clients that cannot draw blocks.
type payload struct {
	Text   string        `json:"text"`
	Blocks []slack.Block `json:"blocks"`
}

// Fixed action_id names. A button's action_id only tells its position; what a click means
// is decided by the opaque ID in its value, which is all the bot reads.
func actionID(i int) string { return fmt.Sprintf("loopbot_button_%d", i) }

// actionPrefix marks the buttons loopbot draws; clicks on anything else are ignored.
const actionPrefix = "loopbot_button_"

// kindEmoji leads a message's header or first line, so each kind is told apart at a glance.
var kindEmoji = map[bot.MessageKind]string{
	bot.KindStatus:   ":robot_face:",
	bot.KindApproval: ":raised_hand:",
	bot.KindAnswer:   ":white_check_mark:",
	bot.KindFailure:  ":warning:",
	bot.KindQuestion: ":question:",
	bot.KindNotice:   ":information_source:",
	bot.KindGrants:   ":key:",
}

// planEmoji draws each plan mark.
var planEmoji = map[text.Mark]string{
	text.MarkPending: ":white_large_square:",
	text.MarkActive:  ":hourglass_flowing_sand:",
	text.MarkDone:    ":white_check_mark:",
	text.MarkFailed:  ":x:",
}

// errBadButton is returned for a button the bot built wrongly: retrying cannot fix it.
var errBadButton = errors.New("bad button")

// render turns a bot message into Slack messages. Status and approval cards are always one
// message (they are edited in place), as is anything rendered for an edit (single): body
// text that does not fit is cut with a mark. The other kinds are split into as many messages
// as their text needs, each within every limit; the header goes on the first and the plan,
// fields, footer and buttons on the last. For an app with Slack's agent features
// (assistant), an answer's rating buttons are Slack's feedback buttons.
func render(m bot.Message, single, assistant bool) ([]payload, error) {
	var rating slack.Block
	if assistant {
		rating, m.Buttons = feedbackBlock(m.Buttons)
	}
	buttons, err := renderButtons(m.Buttons)
	if err != nil {
		return nil, err
	}
	single = single || m.Kind == bot.KindStatus || m.Kind == bot.KindApproval

	var header slack.Block
	title := strings.TrimSpace(m.Title)
	if title != "" {
		header = slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, text.ClipRunes(plain(emojiFor(m.Kind)+" "+title), maxHeaderText), true, false))
	}
	body := mrkdwn(strings.TrimSpace(m.Text))
	if title == "" && body != "" {
		body = emojiFor(m.Kind) + " " + body
	}
	chunks := split(body, maxSectionText)
	if single && len(chunks) > textSections {
		chunks = append(chunks[:textSections-1], clipMrkdwn(chunks[textSections-1], maxSectionText-len("\n_(cut: too long for one message)_"))+"\n_(cut: too long for one message)_")
	}

	var tail []slack.Block
	if b := renderPlan(m.Plan); b != nil {
		tail = append(tail, b)
	}
	tail = append(tail, renderFields(m.Fields)...)
	// A card's tool calls, as one line: the console folds out their arguments and results.
	if l := m.StepsLine(); l != "" {
		tail = append(tail, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, clipMrkdwn(escape(l), maxContextText), false, false)))
	}
	if f := strings.TrimSpace(m.Footer); f != "" {
		tail = append(tail, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, clipMrkdwn(escape(f), maxContextText), false, false)))
	}
	if len(buttons) > 0 {
		tail = append(tail, slack.NewActionBlock("loopbot_actions", buttons...))
	}
	if rating != nil {
		tail = append(tail, rating)
	}

	var out []payload
	for first := true; first || len(chunks) > 0; first = false {
		var blocks []slack.Block
		var fallbackText []string
		if first && header != nil {
			blocks = append(blocks, header)
			fallbackText = append(fallbackText, escape(text.ClipRunes(title, maxHeaderText)))
		}
		n := min(len(chunks), textSections)
		for _, c := range chunks[:n] {
			blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, c, false, false), nil, nil))
			fallbackText = append(fallbackText, c)
		}
		chunks = chunks[n:]
		if len(chunks) == 0 {
			blocks = append(blocks, tail...)
		}
		out = append(out, payload{Text: fallback(fallbackText, m), Blocks: blocks})
	}
	return out, nil
}

func emojiFor(k bot.MessageKind) string {
	if e, ok := kindEmoji[k]; ok {
		return e
	}
	return ":speech_balloon:"
}

// fallback is the message's plain text: what notifications and screen readers get. It is
// built from the same escaped text as the blocks, so it cannot ping anyone either.
func fallback(parts []string, m bot.Message) string {
	s := strings.Join(parts, "\n")
	if strings.TrimSpace(s) == "" {
		s = escape(strings.TrimSpace(m.Footer))
	}
	if strings.TrimSpace(s) == "" {
		s = "loopbot " + string(m.Kind)
	}
	return clipMrkdwn(s, maxMessageText)
}

// renderPlan draws the checklist as one section, one line per item with its status emoji.
// Items that do not fit are counted at the end.
func renderPlan(plan []bot.PlanLine) slack.Block {
	if len(plan) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("*Plan*")
	for i, p := range plan {
		line := "\n" + planEmoji[text.PlanMark(p.Status)] + " " + clipMrkdwn(escape(text.ClipRunes(strings.Join(strings.Fields(p.Text), " "), maxPlanLine)), maxPlanLine*5)
		more := fmt.Sprintf("\n…and %d more", len(plan)-i)
		if runeLen(b.String())+runeLen(line)+runeLen(more) > maxSectionText {
			b.WriteString(more)
			break
		}
		b.WriteString(line)
	}
	return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, b.String(), false, false), nil, nil)
}

// renderFields draws plain fields side by side (a section holds ten) and code fields as
// sections of their own with the value in a code block, at most maxFieldBlocks blocks.
func renderFields(fields []bot.Field) []slack.Block {
	var blocks []slack.Block
	var side []*slack.TextBlockObject
	flush := func() {
		if len(side) > 0 {
			blocks = append(blocks, slack.NewSectionBlock(nil, side, nil))
			side = nil
		}
	}
	for i, f := range fields {
		if len(blocks) >= maxFieldBlocks-1 {
			flush()
			rest := fmt.Sprintf("_…and %d more_", len(fields)-i)
			blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, rest, false, false)))
			return blocks
		}
		name := "*" + escape(text.ClipRunes(strings.Join(strings.Fields(f.Name), " "), 100)) + "*"
		if f.Code {
			flush()
			value := strings.ReplaceAll(f.Value, fence, "`\u200b``")
			code := clipMrkdwn(escape(value), maxSectionText-runeLen(name)-len(fence)*2-4)
			blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, name+"\n"+fence+"\n"+code+"\n"+fence, false, false), nil, nil))
			continue
		}
		value := clipMrkdwn(mrkdwn(f.Value), maxFieldText-runeLen(name)-1)
		side = append(side, slack.NewTextBlockObject(slack.MarkdownType, name+"\n"+value, false, false))
		if len(side) == maxSectionFields {
			flush()
		}
	}
	flush()
	return blocks
}

// renderButtons draws the buttons. The value is only the opaque ID, the action_id a fixed
// name by position (marked for a button that asks for a reason); a Confirm text adds a
// confirmation dialog.
func renderButtons(buttons []bot.Button) ([]slack.BlockElement, error) {
	if len(buttons) > maxActionButtons {
		return nil, fmt.Errorf("%w: %d buttons, Slack allows %d", errBadButton, len(buttons), maxActionButtons)
	}
	var els []slack.BlockElement
	for i, b := range buttons {
		if b.ID == "" || len(b.ID) > maxButtonValue {
			return nil, fmt.Errorf("%w: button %q has an ID of %d bytes, want 1 to %d", errBadButton, b.Label, len(b.ID), maxButtonValue)
		}
		label := text.ClipRunes(plain(strings.TrimSpace(b.Label)), maxButtonText)
		if label == "" {
			label = "OK"
		}
		id := actionID(i)
		if b.Reason != "" {
			id = reasonActionID(i) // its click opens the reason modal (modal.go)
		}
		btn := slack.NewButtonBlockElement(id, b.ID, slack.NewTextBlockObject(slack.PlainTextType, label, true, false))
		switch b.Style {
		case bot.StylePrimary:
			btn = btn.WithStyle(slack.StylePrimary)
		case bot.StyleDanger:
			btn = btn.WithStyle(slack.StyleDanger)
		}
		if c := strings.TrimSpace(b.Confirm); c != "" {
			dialog := slack.NewConfirmationBlockObject(
				slack.NewTextBlockObject(slack.PlainTextType, text.ClipRunes(label+"?", maxConfirmTitle), true, false),
				slack.NewTextBlockObject(slack.MarkdownType, clipMrkdwn(escape(c), maxConfirmText), false, false),
				slack.NewTextBlockObject(slack.PlainTextType, text.ClipRunes(label, maxConfirmButton), true, false),
				slack.NewTextBlockObject(slack.PlainTextType, "Cancel", true, false),
			)
			if b.Style == bot.StyleDanger {
				dialog = dialog.WithStyle(slack.StyleDanger)
			}
			btn = btn.WithConfirm(dialog)
		}
		els = append(els, btn)
	}
	return els, nil
}
