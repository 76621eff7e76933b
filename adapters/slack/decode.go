package slack

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/internal/lazyre"
)

// platform is the name of this adapter's platform in bot.ThreadRef.Platform.
const platform = "slack"

// identity is who the bot is in the workspace, as auth.test reports it. Inbound decoding
// needs it to strip the bot's mention and to drop the bot's own messages.
type identity struct {
	UserID string // the bot user, U…
	BotID  string // the bot, B…
	// TeamID is the workspace the app is installed in, T…: the Workspace of every thread
	// the adapter names, whichever organisation's member wrote in it.
	TeamID string
}

// The decoders below read Slack's payloads into loopbot's own small structs rather than
// slack-go's, so that one decoder serves both transports (Socket Mode hands over the raw
// payload too) and a payload field slack-go does not know, or an event type missing from
// its registry, costs nothing.

// callback is the outer Events API envelope.
type callback struct {
	Type      string          `json:"type"`
	TeamID    string          `json:"team_id"`
	EventID   string          `json:"event_id"`
	Challenge string          `json:"challenge"`
	Event     json.RawMessage `json:"event"`
	// Authorizations name the installation the event is delivered for; its team is the
	// app's own even when team_id is another organisation's (a Slack Connect channel).
	Authorizations []struct {
		TeamID string `json:"team_id"`
	} `json:"authorizations"`
}

// installTeam is the workspace the app is installed in, as far as the callback tells.
func (cb callback) installTeam() string {
	if len(cb.Authorizations) > 0 && cb.Authorizations[0].TeamID != "" {
		return cb.Authorizations[0].TeamID
	}
	return cb.TeamID
}

// message is the inner event of app_mention and message.* events.
type message struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	User        string `json:"user"`
	BotID       string `json:"bot_id"`
	Text        string `json:"text"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts"`
	Channel     string `json:"channel"`
	ChannelType string `json:"channel_type"`
	// Edited is set when Slack sends an app_mention again because its author edited the
	// message: a new event_id for a goal the bot already took.
	Edited *struct {
		User string `json:"user"`
		TS   string `json:"ts"`
	} `json:"edited"`
}

// userSubtypes are the message subtypes a person writes: a reply also sent to the channel,
// and a message with a file. Every other subtype is an edit, a deletion, a join, a bot or
// some other change that is not someone talking to the bot.
var userSubtypes = map[string]bool{"": true, "thread_broadcast": true, "file_share": true}

// decodeEvent reads an Events API callback (the body of an HTTP event request, or the
// payload of a Socket Mode events_api envelope). ok is false for events loopbot does not
// act on; err is set for payloads that are not valid.
func decodeEvent(body []byte, self identity) (ev bot.Event, ok bool, err error) {
	ev, _, ok, err = decodeMessage(body, self)
	return ev, ok, err
}

// decodeMessage is decodeEvent that also returns the message's own ts, which differs from
// the thread's for a message inside a thread.
func decodeMessage(body []byte, self identity) (ev bot.Event, ts string, ok bool, err error) {
	cb, m, err := decodeCallback(body)
	if err != nil || cb.Type != "event_callback" {
		return bot.Event{}, "", false, err
	}
	return messageOf(cb, m, self)
}

// decodeCallback reads an Events API callback and, when it is an event_callback, its inner
// event as a message, each once: the receiving loop decodes every envelope's payload before
// its ack. It decodes with encoding/json's rules on jsontext, encoding/json/v2's syntactic
// layer, straight into the two structs (callbackdecode.go); FuzzDecodeCallback holds it to
// encoding/json. cb.Event is a slice of body.
func decodeCallback(body []byte) (cb callback, m message, err error) {
	cb, m, err = decodeCallbackFields(body)
	if err != nil {
		return callback{}, message{}, fmt.Errorf("decode event callback: %w", err)
	}
	return cb, m, nil
}

// messageOf is decodeMessage of a callback already decoded.
func messageOf(cb callback, m message, self identity) (ev bot.Event, ts string, ok bool, err error) {
	if m.Channel == "" || m.TS == "" {
		if m.Type == "app_mention" || m.Type == "message" {
			return bot.Event{}, "", false, fmt.Errorf("decode event %s: %s without channel or ts", cb.EventID, m.Type)
		}
		return bot.Event{}, "", false, nil
	}
	// The bot's own messages and other bots' are never goals or replies.
	if m.BotID != "" || m.User == "" || m.User == self.UserID || !userSubtypes[m.Subtype] {
		return bot.Event{}, "", false, nil
	}
	// An edit never starts a run: the mention it edits already did, or was refused.
	if m.Edited != nil {
		return bot.Event{}, "", false, nil
	}
	ev = bot.Event{
		ID:     cb.EventID,
		Thread: bot.ThreadRef{Platform: platform, Workspace: firstOf(self.TeamID, cb.installTeam()), Channel: m.Channel, Thread: m.TS},
		User:   bot.User{ID: m.User},
		At:     tsTime(m.TS),
	}
	// The text without the bot's mention, once for both uses: stripMention returns the text
	// itself when there is none.
	stripped := m.Text
	if self.UserID != "" {
		stripped = stripMention(m.Text, "<@"+self.UserID)
	}
	mentionsMe := stripped != m.Text
	ev.Text = unescapeGoal(stripped)
	switch {
	case m.Type == "app_mention":
		// Direct messages arrive as message.im events, which are handled below; Slack
		// does not send app_mention for them, and if it did the goal would run twice.
		if isDM(m.Channel) {
			return bot.Event{}, "", false, nil
		}
		if m.ThreadTS != "" {
			ev.Thread.Thread = m.ThreadTS
		}
		ev.Kind = bot.EventMention
	case m.Type == "message" && (m.ChannelType == "im" || isDM(m.Channel)):
		ev.Kind, ev.Direct = bot.EventMention, true
		if m.ThreadTS != "" {
			ev.Thread.Thread, ev.Kind = m.ThreadTS, bot.EventReply
		}
	case m.Type == "message":
		// A message that mentions the bot also arrives as app_mention, which starts or
		// continues the run; a message outside a thread is not the bot's business.
		if m.ThreadTS == "" || m.ThreadTS == m.TS || mentionsMe {
			return bot.Event{}, "", false, nil
		}
		ev.Thread.Thread, ev.Kind = m.ThreadTS, bot.EventReply
	default:
		return bot.Event{}, "", false, nil
	}
	if ev.Kind == bot.EventMention {
		if c := commandWord(ev.Text); c != "" {
			ev.Kind, ev.Command, ev.Text = bot.EventCommand, c, ""
		} else if level, ok := autonomyWords(ev.Text); ok {
			ev.Kind, ev.Command, ev.Text = bot.EventCommand, bot.CommandAutonomy, level
		}
	}
	return ev, m.TS, true, nil
}

// commandWord recognises "@loopbot status" and "@loopbot cancel": the way to ask about or
// stop the run of a thread from inside it, since a slash command does not say which thread
// it was typed in; and "@loopbot grants", which lists the channel's grants in the thread.
func commandWord(text string) string {
	switch strings.ToLower(strings.TrimSpace(text)) {
	case "status":
		return bot.CommandStatus
	case "cancel", "stop":
		return bot.CommandCancel
	case "grants":
		return bot.CommandGrants
	}
	return ""
}

// isDM reports whether a channel ID is a direct message with the bot.
func isDM(channel string) bool { return strings.HasPrefix(channel, "D") }

// goalText is what the person asked: the text without the bot's mention, with Slack's
// entities decoded. Other people's mentions stay as Slack wrote them.
func goalText(text, botUserID string) string {
	if botUserID != "" {
		text = stripMention(text, "<@"+botUserID)
	}
	return unescapeGoal(text)
}

// unescapeGoal is goalText of a text without the bot's mention. A text without an entity is
// not copied (each of unescaper's entities starts with '&').
func unescapeGoal(text string) string {
	if strings.IndexByte(text, '&') >= 0 {
		text = unescaper.Replace(text)
	}
	return strings.TrimSpace(text)
}

// stripMention removes every <@ID> and <@ID|name> that starts with open ("<@ID"); a text
// without one is returned as it is, not copied.
func stripMention(text, open string) string {
	if !strings.Contains(text, open) {
		return text
	}
	var out strings.Builder
	out.Grow(len(text))
	for {
		i := strings.Index(text, open)
		if i < 0 {
			break
		}
		rest := text[i+len(open):]
		end := strings.IndexByte(rest, '>')
		if end < 0 || (rest[0] != '>' && rest[0] != '|') {
			// Not this mention (a longer ID that starts the same, or no closing '>').
			out.WriteString(text[:i+len(open)])
			text = rest
			continue
		}
		out.WriteString(text[:i])
		text = rest[end+1:]
	}
	out.WriteString(text)
	return out.String()
}

// tsTime reads a Slack timestamp ("1700000000.123456") as a time; zero if it is not one.
func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || s < 0 || s > 1<<40 {
		return time.Time{}
	}
	var us int64
	if frac != "" {
		frac = (frac + "000000")[:6]
		if us, err = strconv.ParseInt(frac, 10, 64); err != nil || us < 0 {
			return time.Time{}
		}
	}
	return time.Unix(s, us*1000).UTC()
}

// actor is who acted in an interactivity payload, and in which workspace.
type actor struct {
	Team struct {
		ID string `json:"id"`
	} `json:"team"`
	User struct {
		ID       string `json:"id"`
		Username string `json:"username"`
		Name     string `json:"name"`
	} `json:"user"`
}

// interaction is the part of an interactivity payload loopbot reads.
type interaction struct {
	Type        string `json:"type"`
	TriggerID   string `json:"trigger_id"`
	ResponseURL string `json:"response_url"`
	actor
	Channel struct {
		ID string `json:"id"`
	} `json:"channel"`
	Container struct {
		MessageTS string `json:"message_ts"`
		ThreadTS  string `json:"thread_ts"`
		ChannelID string `json:"channel_id"`
	} `json:"container"`
	Message struct {
		TS       string `json:"ts"`
		ThreadTS string `json:"thread_ts"`
	} `json:"message"`
	Actions []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
		ActionTS string `json:"action_ts"`
	} `json:"actions"`
}

// decodeInteraction reads a block_actions payload (the JSON in the payload form field of
// an HTTP interactivity request, or a Socket Mode interactive envelope's payload) into an
// EventAction whose ActionID is the clicked button's value: the opaque ID, and nothing else
// from the payload decides what the click does. ok is false for other interactions and for
// buttons loopbot did not draw.
func decodeInteraction(body []byte) (ev bot.Event, ok bool, err error) {
	var in interaction
	if err := json.Unmarshal(body, &in); err != nil {
		return bot.Event{}, false, fmt.Errorf("decode interaction: %w", err)
	}
	if in.Type == "view_submission" {
		return decodeSubmission(body)
	}
	if in.Type != "block_actions" {
		return bot.Event{}, false, nil
	}
	i := -1
	for k, a := range in.Actions {
		if strings.HasPrefix(a.ActionID, actionPrefix) && a.Value != "" {
			i = k
			break
		}
	}
	if i < 0 {
		return bot.Event{}, false, nil
	}
	act := in.Actions[i]
	channel := firstOf(in.Channel.ID, in.Container.ChannelID)
	msgTS := firstOf(in.Message.TS, in.Container.MessageTS)
	thread := firstOf(in.Message.ThreadTS, in.Container.ThreadTS, msgTS)
	if in.User.ID == "" || channel == "" || thread == "" {
		return bot.Event{}, false, errors.New("decode interaction: block_actions without user, channel or message")
	}
	// The trigger ID is unique per click and the same in a redelivery of that click.
	id := "action:" + in.TriggerID
	if in.TriggerID == "" {
		id = "action:" + channel + ":" + msgTS + ":" + act.ActionTS
	}
	return bot.Event{
		Kind:     bot.EventAction,
		ID:       id,
		Thread:   bot.ThreadRef{Platform: platform, Workspace: in.Team.ID, Channel: channel, Thread: thread},
		User:     bot.User{ID: in.User.ID, Name: firstOf(in.User.Username, in.User.Name)},
		ActionID: act.Value,
		At:       tsTime(act.ActionTS),
	}, true, nil
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// slashCommand is the part of a slash command loopbot reads. Over HTTP it arrives as form
// fields, over Socket Mode as JSON with the same names.
type slashCommand struct {
	TeamID      string `json:"team_id"`
	ChannelID   string `json:"channel_id"`
	UserID      string `json:"user_id"`
	UserName    string `json:"user_name"`
	Command     string `json:"command"`
	Text        string `json:"text"`
	ResponseURL string `json:"response_url"`
	TriggerID   string `json:"trigger_id"`
}

func slashFromForm(v url.Values) slashCommand {
	return slashCommand{
		TeamID: v.Get("team_id"), ChannelID: v.Get("channel_id"), UserID: v.Get("user_id"),
		UserName: v.Get("user_name"), Command: v.Get("command"), Text: v.Get("text"),
		ResponseURL: v.Get("response_url"), TriggerID: v.Get("trigger_id"),
	}
}

// command is a decoded slash command: an event for the bot, or a reply to give at once
// (help, a missing thread) instead.
type command struct {
	ev bot.Event
	// goal is set for a start command: the adapter posts it as the root of a new thread
	// and fills in ev.Thread.Thread before the bot sees the event.
	goal        string
	responseURL string
	reply       string
}

// Replies given at once to slash commands that are not for the bot. The %[1]s verbs are
// the configured command's name.
const (
	helpText = "Usage: `%[1]s <goal>` starts a run in a new thread. " +
		"`%[1]s status <thread link>` and `%[1]s cancel <thread link>` act on a thread's run " +
		"(or mention me with `status` or `cancel` in the thread). " +
		"`%[1]s autonomy` shows this channel's autonomy level; approvers set it with `%[1]s autonomy careful|balanced|bold`. " +
		"`%[1]s grants` lists the grants of this channel, with Revoke buttons."
	noThreadText = "Slack does not tell apps which thread a slash command was typed in. " +
		"Add the thread's link (Copy link on its first message), or mention me with `%s` in the thread."
	otherChannelText = "That thread is in another channel. Run `%s %s` in the thread's own channel, " +
		"or mention me there."
	otherCommandText = "That command is not loopbot's here. Use `%[1]s <goal>`, or `%[1]s help`."
)

// decodeCommand reads an invocation of the command called name: "<name> <goal>",
// "<name> status <thread>" or "<name> cancel <thread>", where <thread> is a message link or
// a thread timestamp. Any other command (one routed to this app's URL by mistake, or a
// second command of the app) is answered with otherCommandText, never run.
func decodeCommand(sc slashCommand, name string) (command, error) {
	if sc.TriggerID == "" || sc.UserID == "" || sc.ChannelID == "" {
		return command{}, errors.New("decode slash command: no trigger_id, user_id or channel_id")
	}
	c := command{
		responseURL: sc.ResponseURL,
		ev: bot.Event{
			Kind:   bot.EventCommand,
			ID:     "command:" + sc.TriggerID,
			Thread: bot.ThreadRef{Platform: platform, Workspace: sc.TeamID, Channel: sc.ChannelID},
			User:   bot.User{ID: sc.UserID, Name: sc.UserName},
		},
	}
	if !strings.EqualFold(strings.TrimSpace(sc.Command), name) {
		c.reply = fmt.Sprintf(otherCommandText, name)
		return c, nil
	}
	text := strings.TrimSpace(sc.Text)
	word, rest, _ := strings.Cut(text, " ")
	switch strings.ToLower(word) {
	case "", "help":
		c.reply = fmt.Sprintf(helpText, name)
		return c, nil
	case "grants":
		// The channel's grants, posted with their Revoke buttons in a thread of their own
		// under a root message, as a goal's run is.
		c.ev.Command = bot.CommandGrants
		c.goal = "grants"
		return c, nil
	case bot.CommandAutonomy:
		// A channel's setting: the channel stands for its thread.
		c.ev.Command, c.ev.Text, c.ev.Thread.Thread = bot.CommandAutonomy, strings.TrimSpace(rest), sc.ChannelID
		return c, nil
	case "status", "cancel":
		c.ev.Command = bot.CommandStatus
		if strings.EqualFold(word, "cancel") {
			c.ev.Command = bot.CommandCancel
		}
		channel, ts, ok := parseThread(strings.TrimSpace(rest))
		if !ok {
			c.reply = fmt.Sprintf(noThreadText, strings.ToLower(word))
			return c, nil
		}
		if channel != "" && channel != sc.ChannelID {
			// Anyone may paste any link; typing the command in the thread's own channel is
			// what shows the asker can see that thread (a private channel's goal must not
			// be shown in another channel).
			c.reply = fmt.Sprintf(otherChannelText, name, strings.ToLower(word))
			return c, nil
		}
		c.ev.Thread.Thread = ts
		return c, nil
	}
	c.ev.Command = bot.CommandStart
	c.ev.Text = text
	if strings.EqualFold(text, "playbooks") {
		// The list is an answer for the asker alone: no root message for it, and the
		// channel stands for the thread, as nothing is posted there.
		c.ev.Thread.Thread = sc.ChannelID
		return c, nil
	}
	c.goal = text
	return c, nil
}

var (
	permalink = lazyre.New(`^<?https://[^/\s]+/archives/([A-Z0-9]+)/p(\d{10})(\d{6})(\?[^\s>|]*)?(\|[^>]*)?>?$`)
	threadTS  = lazyre.New(`^\d{10}\.\d{6}$`)
)

// parseThread reads a thread given as a message permalink (of its first message or of a
// reply, whose link carries thread_ts) or as a bare timestamp.
func parseThread(s string) (channel, ts string, ok bool) {
	if threadTS.MatchString(s) {
		return "", s, true
	}
	m := permalink.FindStringSubmatch(s)
	if m == nil {
		return "", "", false
	}
	channel, ts = m[1], m[2]+"."+m[3]
	if m[4] != "" {
		if q, err := url.ParseQuery(m[4][1:]); err == nil && threadTS.MatchString(q.Get("thread_ts")) {
			ts = q.Get("thread_ts")
		}
	}
	return channel, ts, true
}
