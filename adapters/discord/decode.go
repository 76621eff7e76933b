package discord

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// platformName is the adapter's name in bot.ThreadRef.Platform.
const platformName = "discord"

// Command names, as registered and as they arrive.
const (
	cmdStart  = "loopbot"
	cmdStatus = "loopbot-status"
	cmdCancel = "loopbot-cancel"
	optGoal   = "goal"
)

// errIgnored marks a payload that is valid but not for the bot: another application's
// command, a component that is not a button, a message by a bot.
var errIgnored = errors.New("not for loopbot")

// interaction is a decoded interaction: the discordgo value to respond with and the event it
// carries. Thread.Thread is empty when the run needs a new thread (a start outside one).
type interaction struct {
	it   *discordgo.Interaction
	ping bool
	ev   bot.Event
	// private asks for an ephemeral deferred response: status and cancel answer the caller
	// alone.
	private bool
	// threadOwner is who started the thread the interaction happened in, when Discord says.
	threadOwner string
}

// channelInfo is the part of a channel the adapter needs.
type channelInfo struct {
	Type     discordgo.ChannelType `json:"type"`
	ParentID string                `json:"parent_id"`
	OwnerID  string                `json:"owner_id"`
}

// isThread reports whether the channel is a thread.
func (c channelInfo) isThread() bool {
	switch c.Type {
	case discordgo.ChannelTypeGuildPublicThread, discordgo.ChannelTypeGuildPrivateThread, discordgo.ChannelTypeGuildNewsThread:
		return true
	}
	return false
}

// decodeInteraction decodes an INTERACTION_CREATE payload (the gateway's d, or the body of
// an HTTP interaction). It returns errIgnored for interactions that are not loopbot's.
func decodeInteraction(raw []byte) (*interaction, error) {
	var it discordgo.Interaction
	if err := json.Unmarshal(raw, &it); err != nil {
		return nil, fmt.Errorf("decode interaction: %w", err)
	}
	if it.Type == discordgo.InteractionPing {
		return &interaction{it: &it, ping: true}, nil
	}
	// discordgo drops the partial channel Discord sends along; it says whether the
	// interaction happened in a thread.
	var extra struct {
		Channel *channelInfo `json:"channel"`
	}
	if err := json.Unmarshal(raw, &extra); err != nil {
		return nil, fmt.Errorf("decode interaction channel: %w", err)
	}
	if it.ID == "" || it.Token == "" || it.ChannelID == "" {
		return nil, errors.New("decode interaction: id, token or channel_id missing")
	}
	in := &interaction{it: &it}
	ev := &in.ev
	ev.ID = it.ID
	ev.User = interactionUser(&it)
	if ev.User.ID == "" {
		return nil, fmt.Errorf("decode interaction %s: no user", it.ID)
	}
	ev.At = snowflakeTime(it.ID)
	ev.Thread = bot.ThreadRef{Platform: platformName, Workspace: it.GuildID, Channel: it.ChannelID}
	inThread := extra.Channel != nil && extra.Channel.isThread() && extra.Channel.ParentID != ""
	if inThread {
		ev.Thread.Channel, ev.Thread.Thread = extra.Channel.ParentID, it.ChannelID
		in.threadOwner = extra.Channel.OwnerID
	}
	switch it.Type {
	case discordgo.InteractionApplicationCommand:
		data, ok := it.Data.(discordgo.ApplicationCommandInteractionData)
		if !ok {
			return nil, fmt.Errorf("decode interaction %s: no command data", it.ID)
		}
		ev.Kind = bot.EventCommand
		switch data.Name {
		case cmdStart:
			ev.Command = bot.CommandStart
			for _, o := range data.Options {
				if o != nil && o.Name == optGoal {
					if s, ok := o.Value.(string); ok {
						ev.Text = strings.TrimSpace(s)
					}
				}
			}
			if strings.EqualFold(ev.Text, "playbooks") {
				// The playbook list is the caller's alone: answered privately, with no
				// thread opened for it (the channel stands for itself, as for status).
				in.private = true
				if ev.Thread.Thread == "" {
					ev.Thread.Thread = it.ChannelID
				}
			}
			// In a DM there are no threads; elsewhere the run gets a thread of its own.
			if !inThread && it.GuildID == "" {
				ev.Thread.Thread = it.ChannelID
			}
		case cmdStatus, cmdCancel:
			ev.Command, in.private = bot.CommandStatus, true
			if data.Name == cmdCancel {
				ev.Command = bot.CommandCancel
			}
			// Outside a thread the channel stands for itself.
			if ev.Thread.Thread == "" {
				ev.Thread.Thread = it.ChannelID
			}
		case cmdAutonomy:
			decodeAutonomy(ev, data, it.ChannelID)
			in.private = true
		default:
			return nil, errIgnored
		}
	case discordgo.InteractionMessageComponent:
		data, ok := it.Data.(discordgo.MessageComponentInteractionData)
		if !ok || data.ComponentType != discordgo.ButtonComponent || data.CustomID == "" {
			return nil, errIgnored
		}
		ev.Kind, ev.ActionID = bot.EventAction, data.CustomID
		if ev.Thread.Thread == "" {
			// A button on a message outside a thread (or on a payload without the channel):
			// the bot finds the run by the button's ID alone.
			ev.Thread.Thread = it.ChannelID
		}
	default:
		return nil, errIgnored
	}
	return in, nil
}

// interactionUser is the person who acted: the member in a guild, the user in a DM.
func interactionUser(it *discordgo.Interaction) bot.User {
	u := it.User
	nick := ""
	if it.Member != nil && it.Member.User != nil {
		u, nick = it.Member.User, it.Member.Nick
	}
	if u == nil {
		return bot.User{}
	}
	return userOf(u, nick)
}

func userOf(u *discordgo.User, nick string) bot.User {
	name := nick
	if name == "" {
		name = u.GlobalName
	}
	if name == "" {
		name = u.Username
	}
	return bot.User{ID: u.ID, Name: name, Bot: u.Bot || u.System}
}

// message is a decoded MESSAGE_CREATE that may concern the bot. Where it belongs (a DM, a
// run's thread, a channel where the bot was mentioned) is decided with the channel's kind,
// which the payload does not carry.
type message struct {
	ev bot.Event // ID, User, Text, At; Thread.Workspace and Channel
	// mentioned: the bot was mentioned by user ID.
	mentioned bool
	// dm: the message came in a direct message channel.
	dm bool
}

// decodeMessage decodes a MESSAGE_CREATE payload. It returns errIgnored for messages by the
// bot itself, other bots and webhooks, system messages, and messages with no text.
func decodeMessage(raw []byte, botID string) (*message, error) {
	var m discordgo.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode message: %w", err)
	}
	if m.ID == "" || m.ChannelID == "" || m.Author == nil || m.Author.ID == "" {
		return nil, errors.New("decode message: id, channel_id or author missing")
	}
	if m.Author.ID == botID || m.Author.Bot || m.Author.System || m.WebhookID != "" {
		return nil, errIgnored
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return nil, errIgnored
	}
	out := &message{dm: m.GuildID == ""}
	for _, u := range m.Mentions {
		if u != nil && botID != "" && u.ID == botID {
			out.mentioned = true
		}
	}
	text := m.Content
	if botID != "" {
		text = strings.NewReplacer("<@"+botID+">", "", "<@!"+botID+">", "").Replace(text)
	}
	text = strings.TrimSpace(text)
	if text == "" && !out.mentioned {
		// Without the message content intent, Discord sends messages that do not mention
		// the bot without their text: there is nothing to act on.
		return nil, errIgnored
	}
	nick := ""
	if m.Member != nil {
		nick = m.Member.Nick
	}
	out.ev = bot.Event{
		ID:     m.ID,
		User:   userOf(m.Author, nick),
		Text:   text,
		At:     snowflakeTime(m.ID),
		Thread: bot.ThreadRef{Platform: platformName, Workspace: m.GuildID, Channel: m.ChannelID},
	}
	return out, nil
}

// snowflakeTime is when a Discord ID was made, or the zero time for a malformed ID.
func snowflakeTime(id string) time.Time {
	t, err := discordgo.SnowflakeTimestamp(id)
	if err != nil || !isSnowflake(id) {
		return time.Time{}
	}
	return t.UTC()
}

// threadName names a run's thread after its goal, within Discord's 100 characters.
func threadName(goal string) string {
	name := text.ClipBytes(oneLine(goal), 100)
	if name == "" {
		return "loopbot run"
	}
	return name
}
