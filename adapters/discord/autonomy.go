package discord

import (
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/loopbot/loopbot/bot"
)

// The autonomy command: /loopbot-autonomy shows the channel's autonomy level, and
// /loopbot-autonomy level:<careful|balanced|bold> sets it (the bot lets approvers only).
const (
	cmdAutonomy = "loopbot-autonomy"
	optLevel    = "level"
)

// autonomyCommand is the command as registered, with the levels as choices.
func autonomyCommand() *discordgo.ApplicationCommand {
	choice := func(l string) *discordgo.ApplicationCommandOptionChoice {
		return &discordgo.ApplicationCommandOptionChoice{Name: l, Value: l}
	}
	return &discordgo.ApplicationCommand{
		Name:        cmdAutonomy,
		Description: "Show this channel's autonomy level, or set it (approvers only)",
		Options: []*discordgo.ApplicationCommandOption{{
			Type:        discordgo.ApplicationCommandOptionString,
			Name:        optLevel,
			Description: "careful asks most, bold least; risky calls always ask",
			Choices:     []*discordgo.ApplicationCommandOptionChoice{choice("careful"), choice("balanced"), choice("bold")},
		}},
	}
}

// decodeAutonomy fills ev from the command's data: the level to set, if given. The channel
// stands for itself outside a thread; inside one, the thread's parent is the channel.
func decodeAutonomy(ev *bot.Event, data discordgo.ApplicationCommandInteractionData, channelID string) {
	ev.Command = bot.CommandAutonomy
	for _, o := range data.Options {
		if o != nil && o.Name == optLevel {
			if s, ok := o.Value.(string); ok {
				ev.Text = strings.TrimSpace(s)
			}
		}
	}
	if ev.Thread.Thread == "" {
		ev.Thread.Thread = channelID
	}
}
