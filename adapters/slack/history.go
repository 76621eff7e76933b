package slack

import (
	"context"
	"errors"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/loopbot/loopbot/bot"
)

// Bounds of fetching a thread's history: pages of conversations.replies read, messages asked
// for per page, and distinct people looked up by name.
const (
	historyPages   = 10
	historyPerPage = 200
	historyNames   = 20
)

// threadHistory fetches what the thread held before the message at before (the mention
// that asks the bot in), oldest first: the newest bot.MaxHistoryMessages messages, the bot's
// own marked Bot, people's with their names (users.info; the user's ID when that fails).
// Other bots' messages are kept with their names; the mention itself and anything after it
// are not.
func (a *Adapter) threadHistory(ctx context.Context, self identity, channel, thread, before string) (*bot.History, error) {
	var msgs []slack.Message
	cursor := ""
	for range historyPages {
		page, more, next, err := a.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
			ChannelID: channel, Timestamp: thread, Latest: before, Limit: historyPerPage, Cursor: cursor,
		})
		if err != nil {
			return nil, classify("conversations.replies", err)
		}
		msgs = append(msgs, page...)
		if len(msgs) > bot.MaxHistoryMessages {
			msgs = msgs[len(msgs)-bot.MaxHistoryMessages:]
		}
		if !more || next == "" {
			break
		}
		cursor = next
	}
	end := tsTime(before)
	names := map[string]string{}
	h := &bot.History{}
	for _, m := range msgs {
		if m.Timestamp == before || (!end.IsZero() && !tsTime(m.Timestamp).Before(end)) {
			continue
		}
		own := (self.UserID != "" && m.User == self.UserID) || (self.BotID != "" && m.BotID == self.BotID)
		if !own && !userSubtypes[m.SubType] && m.SubType != "bot_message" {
			continue
		}
		hm := bot.HistoryMessage{Bot: own, Text: goalText(m.Text, self.UserID)}
		switch {
		case own:
		case m.BotID != "" || m.SubType == "bot_message":
			hm.Name = firstOf(botName(m), "a bot")
		default:
			hm.Name = a.userName(ctx, names, m.User)
		}
		if hm.Text != "" {
			h.Messages = append(h.Messages, hm)
		}
	}
	return h, nil
}

func botName(m slack.Message) string {
	if m.BotProfile != nil && m.BotProfile.Name != "" {
		return m.BotProfile.Name
	}
	return m.Username
}

// userName is how Slack shows user: their display name, else their real name, else their
// ID. names caches the lookups of one fetch; past historyNames people, or when users.info
// fails (no users:read scope, say), the ID stands in.
func (a *Adapter) userName(ctx context.Context, names map[string]string, user string) string {
	if user == "" {
		return "someone"
	}
	if n, ok := names[user]; ok {
		return n
	}
	name := user
	if len(names) < historyNames {
		u, err := a.api.GetUserInfoContext(ctx, user)
		switch {
		case err == nil:
			name = firstOf(u.Profile.DisplayName, u.Profile.RealName, u.RealName, u.Name, user)
		case !errors.Is(err, context.Canceled):
			a.log.Debug("slack: users.info for thread history", "user", user, "err", logSafe(fmt.Errorf("users.info: %w", err)))
		}
	}
	names[user] = name
	return name
}
