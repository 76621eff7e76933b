package discord

import (
	"context"
	"slices"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// historyLimit is how many messages one fetch asks for: the bot keeps no more, and Discord
// answers up to 100 in one page, so one request is enough.
const historyLimit = bot.MaxHistoryMessages

// history fetches what a channel or thread held before the message (or interaction) with ID
// before, for a run that starts there: one GET /channels/{id}/messages, read by
// historyOf.
func (a *Adapter) history(ctx context.Context, channelID, before string) (*bot.History, error) {
	msgs, err := call(ctx, "fetch recent messages", func(opts ...discordgo.RequestOption) ([]*discordgo.Message, error) {
		return a.s.ChannelMessages(channelID, historyLimit, before, "", "", opts...)
	})
	if err != nil {
		return nil, err
	}
	return historyOf(msgs, a.currentBotID(), before), nil
}

// withHistory sets ev.History to what channelID held before the ID before. A failed fetch
// (no Read Message History permission, say) is logged and the run starts without it: the
// goal matters more than its context.
func (a *Adapter) withHistory(ctx context.Context, ev *bot.Event, channelID, before string) {
	h, err := a.history(ctx, channelID, before)
	if err != nil {
		a.log.Warn("discord: fetch recent messages", "event", ev.ID, "channel", channelID, "err", err)
		return
	}
	ev.History = h
}

// historyOf turns a page of GET /channels/{id}/messages (newest first, as Discord sends it)
// into a run's history, oldest first: the bot's own messages marked Bot, everyone else's
// with the name Discord shows for them. Only messages people write (and the bot's answers
// to commands) count, only those older than before, at most bot.MaxHistoryMessages of the
// newest within bot.MaxHistoryBytes, the message that crosses the bound cut.
func historyOf(msgs []*discordgo.Message, botID, before string) *bot.History {
	h := &bot.History{}
	room := bot.MaxHistoryBytes
	for _, m := range msgs {
		if len(h.Messages) == bot.MaxHistoryMessages || room <= 0 {
			break
		}
		if m == nil || m.Author == nil || !historyType(m.Type) || (before != "" && !olderSnowflake(m.ID, before)) {
			continue
		}
		hm := bot.HistoryMessage{Bot: botID != "" && m.Author.ID == botID, Text: strings.TrimSpace(m.ContentWithMentionsReplaced())}
		if hm.Text == "" {
			continue
		}
		if !hm.Bot {
			nick := ""
			if m.Member != nil {
				nick = m.Member.Nick
			}
			hm.Name = userOf(m.Author, nick).Name
		}
		if hm.Text = text.ClipBytes(hm.Text, room); hm.Text == "" {
			break
		}
		room -= len(hm.Text)
		h.Messages = append(h.Messages, hm)
	}
	slices.Reverse(h.Messages)
	return h
}

// historyType reports whether a message of type t is something someone said: a message, a
// reply, or the answer to a command. Joins, pins and thread notices are not.
func historyType(t discordgo.MessageType) bool {
	switch t {
	case discordgo.MessageTypeDefault, discordgo.MessageTypeReply, discordgo.MessageTypeChatInputCommand, discordgo.MessageTypeContextMenuCommand:
		return true
	}
	return false
}

// olderSnowflake reports whether snowflake a was made before b: snowflakes grow with time,
// so the shorter string, or the smaller of the same length, is older.
func olderSnowflake(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
