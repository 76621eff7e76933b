package discord

import (
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// A button that asks for a reason (bot.Button.Reason: Reject, Reject and stop) carries its
// opaque ID behind reasonPrefix. Its click is answered with a modal (interaction response
// type 9) holding one paragraph text input, whose custom_id carries the ID behind
// modalPrefix; the MODAL_SUBMIT interaction is the click, with what was typed as the event's
// Text. Discord answers every button click with the modal, so no click falls back to a plain
// one; a forged custom_id only opens a modal whose submission the bot checks as any click.

const (
	reasonPrefix = "r:"      // a button that asks for a reason
	modalPrefix  = "reason:" // the modal of such a button
	reasonInput  = "reason"  // the modal's text input
	// maxModalTitle is Discord's limit on a modal's title; maxReasonInput what the input
	// takes.
	maxModalTitle  = 45
	maxReasonInput = 1000
)

// buttonCustomID is the custom_id a button is drawn with.
func buttonCustomID(b bot.Button) string {
	if b.Reason != "" {
		return reasonPrefix + b.ID
	}
	return b.ID
}

// reasonModal is the modal a click on a button that asks for a reason opens.
type reasonModal struct {
	actionID string
	label    string // the clicked button's label, the modal's title
}

// response is the modal as the interaction's response.
func (m *reasonModal) response() *discordgo.InteractionResponse {
	title := strings.TrimSpace(m.label)
	if title == "" {
		title = "Reject"
	}
	return &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseModal,
		Data: &discordgo.InteractionResponseData{
			CustomID: modalPrefix + m.actionID,
			Title:    text.ClipBytes(title, maxModalTitle),
			Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
				discordgo.TextInput{CustomID: reasonInput, Label: text.ClipBytes(bot.ReasonLabel, 45), Style: discordgo.TextInputParagraph,
					Placeholder: "What should the run do instead?", MaxLength: maxReasonInput},
			}}},
		},
	}
}

// buttonLabel finds the label of the button with customID on the clicked message.
func buttonLabel(msg *discordgo.Message, customID string) string {
	if msg == nil {
		return ""
	}
	for _, c := range msg.Components {
		row, ok := c.(*discordgo.ActionsRow)
		if !ok {
			continue
		}
		for _, rc := range row.Components {
			if b, ok := rc.(*discordgo.Button); ok && b.CustomID == customID {
				return b.Label
			}
		}
	}
	return ""
}

// modalReason returns the typed reason of a submitted reason modal.
func modalReason(data discordgo.ModalSubmitInteractionData) string {
	for _, c := range data.Components {
		row, ok := c.(*discordgo.ActionsRow)
		if !ok {
			continue
		}
		for _, rc := range row.Components {
			if in, ok := rc.(*discordgo.TextInput); ok && in.CustomID == reasonInput {
				return strings.TrimSpace(in.Value)
			}
		}
	}
	return ""
}
