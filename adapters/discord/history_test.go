package discord

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// emptyHistory checks that ev carries the history of a channel with nothing in it, and
// clears it so ev compares with an event written without one.
func emptyHistory(t *testing.T, ev *bot.Event) {
	t.Helper()
	if ev.History == nil || len(ev.History.Messages) != 0 {
		t.Errorf("history %+v, want fetched and empty", ev.History)
	}
	ev.History = nil
}

// realMessages is the captured GET /channels/{id}/messages payload of testdata (see its
// source field): "victim" then "Math Class", oldest first.
func realMessages(t *testing.T) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile("testdata/channel_messages.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Source   string           `json:"source"`
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil || fx.Source == "" || len(fx.Messages) != 2 {
		t.Fatalf("fixture: %v (source %q, %d messages)", err, fx.Source, len(fx.Messages))
	}
	return fx.Messages
}

// Snowflakes of the scripted conversation: the captured messages are older than all of them.
const (
	histBotMsg  = "960000000000000001" // the bot's earlier message
	histJoin    = "960000000000000002" // a member joined: not something anyone said
	histMention = "970000000000000000" // the mention that asks the bot in
	histLater   = "980000000000000000" // written after the mention
)

// scriptHistory gives ch the captured messages, then the bot's own, a join notice, and a
// message newer than histMention.
func scriptHistory(t *testing.T, f *FakeDiscord, ch string) {
	t.Helper()
	msgs := realMessages(t)
	msgs = append(msgs,
		map[string]any{"id": histBotMsg, "type": 0, "channel_id": ch, "content": "I deployed v1.1 yesterday.",
			"author": map[string]any{"id": discordfake.BotID, "username": "loopbot", "bot": true}},
		map[string]any{"id": histJoin, "type": 7, "channel_id": ch, "content": "",
			"author": map[string]any{"id": "55", "username": "newcomer"}},
		map[string]any{"id": histLater, "type": 0, "channel_id": ch, "content": "after the mention",
			"author": map[string]any{"id": "56", "username": "late"}},
	)
	f.AddHistory(ch, msgs...)
}

// wantScripted is the history scriptHistory's messages make, oldest first.
var wantScripted = []bot.HistoryMessage{
	{Name: "victim", Text: "har inte gått igenom nåt för komplicerat"},
	{Name: "Math Class", Text: "humma humma humma"},
	{Bot: true, Text: "I deployed v1.1 yesterday."},
}

func decodeMessages(t *testing.T, v any) []*discordgo.Message {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out []*discordgo.Message
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestHistoryOf(t *testing.T) {
	real := realMessages(t)
	newestFirst := decodeMessages(t, []any{real[1], real[0]})
	msg := func(id, author, content string) *discordgo.Message {
		return &discordgo.Message{ID: id, Content: content, Author: &discordgo.User{ID: author, Username: "u" + author}}
	}
	many := make([]*discordgo.Message, 0, 60)
	for i := range 60 {
		many = append(many, msg(fmt.Sprint(960000000000000100-i), "7", fmt.Sprint("m", 59-i)))
	}
	big := strings.Repeat("x", 7<<10)
	named := msg("960000000000000010", "8", "hi <@"+discordfake.BotID+">")
	named.Member = &discordgo.Member{Nick: "Bee"}
	named.Mentions = []*discordgo.User{{ID: discordfake.BotID, Username: "loopbot"}}
	join := msg("960000000000000011", "9", "joined")
	join.Type = discordgo.MessageTypeGuildMemberJoin
	for _, tc := range []struct {
		name   string
		msgs   []*discordgo.Message
		before string
		want   []bot.HistoryMessage
	}{
		{name: "captured", msgs: newestFirst, before: histMention, want: wantScripted[:2]},
		{name: "own, nick, mention, join, no author, empty", before: histMention, msgs: []*discordgo.Message{
			msg("960000000000000013", "9", "  "), {ID: "960000000000000012", Content: "ghost"}, join, named,
			msg("960000000000000009", discordfake.BotID, "my answer"),
		}, want: []bot.HistoryMessage{{Bot: true, Text: "my answer"}, {Name: "Bee", Text: "hi @loopbot"}}},
		{name: "newer than before", before: "960000000000000010", msgs: []*discordgo.Message{
			msg("960000000000000011", "9", "later"), msg("960000000000000010", "9", "itself"), msg("960000000000000009", "9", "earlier"),
		}, want: []bot.HistoryMessage{{Name: "u9", Text: "earlier"}}},
		{name: "newest 50", msgs: many, want: func() []bot.HistoryMessage {
			var w []bot.HistoryMessage
			for i := 10; i < 60; i++ {
				w = append(w, bot.HistoryMessage{Name: "u7", Text: fmt.Sprint("m", i)})
			}
			return w
		}()},
		{name: "bytes", msgs: []*discordgo.Message{msg("3", "7", big+"c"), msg("2", "7", big+"b"), msg("1", "7", big+"a")},
			want: []bot.HistoryMessage{
				{Name: "u7", Text: big[:bot.MaxHistoryBytes-2*(len(big)+1)-len(text.Ellipsis)] + text.Ellipsis},
				{Name: "u7", Text: big + "b"}, {Name: "u7", Text: big + "c"},
			}},
		{name: "no room for a cut", msgs: []*discordgo.Message{msg("2", "7", strings.Repeat("y", bot.MaxHistoryBytes-2)), msg("1", "7", "0123456789")},
			want: []bot.HistoryMessage{{Name: "u7", Text: strings.Repeat("y", bot.MaxHistoryBytes-2)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := historyOf(tc.msgs, discordfake.BotID, tc.before)
			if fmt.Sprint(got.Messages) != fmt.Sprint(tc.want) {
				t.Errorf("history\n got %+v\nwant %+v", got.Messages, tc.want)
			}
			n := 0
			for _, m := range got.Messages {
				n += len(m.Text)
			}
			if n > bot.MaxHistoryBytes || len(got.Messages) > bot.MaxHistoryMessages {
				t.Errorf("%d messages of %d bytes, over the bounds", len(got.Messages), n)
			}
		})
	}
}

// messagesGets is the GET /channels/ch/messages requests so far.
func messagesGets(f *FakeDiscord, ch string) []discordfake.Request {
	return discordfake.Find(f.Requests(), "GET", "/api/v9/channels/"+ch+"/messages")
}

func TestGatewayHistory(t *testing.T) {
	f := NewFakeDiscord(t)
	rec := newRecorder(f)
	startGateway(t, f, rec)

	// A mention in someone's thread: the thread so far, one request, before the mention.
	f.AddChannel(map[string]any{"id": "1300", "type": 11, "parent_id": discordfake.Channel, "owner_id": discordfake.UserID})
	scriptHistory(t, f, "1300")
	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload(histMention, "1300", "<@"+discordfake.BotID+"> what now?", discordfake.BotID))
	ev := rec.next(t)
	if ev.History == nil || fmt.Sprint(ev.History.Messages) != fmt.Sprint(wantScripted) {
		t.Errorf("thread mention history %+v, want %+v", ev.History, wantScripted)
	}
	if got := messagesGets(f, "1300"); len(got) != 1 || got[0].Query != "before="+histMention+"&limit=50" {
		t.Errorf("thread history requests %+v, want one before the mention", got)
	}

	// A mention in a channel: the channel's recent messages; the run's new thread is not read.
	scriptHistory(t, f, discordfake.Channel)
	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload(histMention, discordfake.Channel, "<@"+discordfake.BotID+"> and here?", discordfake.BotID))
	ev = rec.next(t)
	if ev.History == nil || fmt.Sprint(ev.History.Messages) != fmt.Sprint(wantScripted) {
		t.Errorf("channel mention history %+v, want %+v", ev.History, wantScripted)
	}
	if got := messagesGets(f, discordfake.Channel); len(got) != 1 || got[0].Query != "before="+histMention+"&limit=50" {
		t.Errorf("channel history requests %+v, want one before the mention", got)
	}

	// A reply in the bot's own thread (the one just opened) fetches nothing: its runs are
	// its context.
	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("990000000000000000", histMention, "go on"))
	if ev = rec.next(t); ev.Kind != bot.EventReply || ev.History != nil {
		t.Errorf("reply %+v, want a reply without history", ev)
	}
	if got := messagesGets(f, histMention); len(got) != 0 {
		t.Errorf("reply in the bot's thread fetched %+v", got)
	}

	// /loopbot in the channel: the channel's messages before the interaction, which is
	// newer than all of them.
	id, token := f.Interaction()
	f.Dispatch(t, "INTERACTION_CREATE", discordfake.SlashPayload(id, token, discordfake.Channel, "", "loopbot", discordfake.GoalOption("sum it up")))
	ev = rec.next(t)
	all := append(append([]bot.HistoryMessage(nil), wantScripted...), bot.HistoryMessage{Name: "late", Text: "after the mention"})
	if ev.History == nil || fmt.Sprint(ev.History.Messages) != fmt.Sprint(all) {
		t.Errorf("command history %+v, want %+v", ev.History, all)
	}
	if got := messagesGets(f, discordfake.Channel); len(got) != 2 || got[1].Query != "before="+id+"&limit=50" {
		t.Errorf("channel history requests %+v, want a second one before the interaction", got)
	}

	// /loopbot in a thread the bot started needs none; in someone's thread, the thread's.
	for _, tc := range []struct {
		owner string
		gets  int
	}{{discordfake.BotID, 1}, {discordfake.UserID, 2}} {
		id, token := f.Interaction()
		p := discordfake.SlashPayload(id, token, "1300", discordfake.Channel, "loopbot", discordfake.GoalOption("more"))
		p["channel"].(map[string]any)["owner_id"] = tc.owner
		f.Dispatch(t, "INTERACTION_CREATE", p)
		ev = rec.next(t)
		if got := messagesGets(f, "1300"); len(got) != tc.gets {
			t.Errorf("command in a thread of %s: %d history requests, want %d", tc.owner, len(got), tc.gets)
		}
		if (ev.History != nil) != (tc.owner != discordfake.BotID) {
			t.Errorf("command in a thread of %s: history %+v", tc.owner, ev.History)
		}
	}
}

// TestGatewayHistoryFails: without Read Message History, Discord answers 403 Missing
// Access; the run starts all the same, without history.
func TestGatewayHistoryFails(t *testing.T) {
	f := NewFakeDiscord(t)
	rec := newRecorder(f)
	startGateway(t, f, rec)
	f.AddChannel(map[string]any{"id": "1300", "type": 11, "parent_id": discordfake.Channel, "owner_id": discordfake.UserID})
	scriptHistory(t, f, "1300")
	f.Fail("GET", "/api/v9/channels/1300/messages", http.StatusForbidden, `{"message": "Missing Access", "code": 50001}`, nil)
	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload(histMention, "1300", "<@"+discordfake.BotID+"> what now?", discordfake.BotID))
	ev := rec.next(t)
	if ev.Kind != bot.EventMention || ev.History != nil {
		t.Errorf("mention after a refused fetch %+v, want a mention without history", ev)
	}
	if got := messagesGets(f, "1300"); len(got) != 1 || got[0].Status != http.StatusForbidden {
		t.Errorf("history requests %+v, want one refused", got)
	}
}

// TestE2EMentionMidThread: the bot, mentioned in a thread that already has a conversation,
// makes one messages request and the model's first request holds what was said before.
func TestE2EMentionMidThread(t *testing.T) {
	for _, refused := range []bool{false, true} {
		t.Run(fmt.Sprint("refused=", refused), func(t *testing.T) {
			e := newE2E(t, bot.Config{EditInterval: agent.Duration(10 * time.Millisecond)}, llmtest.Text("Nothing more to do."))
			e.f.AddChannel(map[string]any{"id": "1300", "type": 11, "parent_id": discordfake.Channel, "owner_id": discordfake.UserID})
			scriptHistory(t, e.f, "1300")
			if refused {
				e.f.Fail("GET", "/api/v9/channels/1300/messages", http.StatusForbidden, `{"message": "Missing Access", "code": 50001}`, nil)
			}
			e.start(t)
			e.f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload(histMention, "1300", "<@"+discordfake.BotID+"> what is left to do?", discordfake.BotID))
			waitUntil(t, "the model call", func() bool { return len(e.llm.Requests()) > 0 })
			waitUntil(t, "the answer", func() bool {
				for _, m := range e.f.ChannelMessages("1300") {
					if b, _ := json.Marshal(m.Payload); strings.Contains(string(b), "Nothing more to do.") {
						return true
					}
				}
				return false
			})
			if got := messagesGets(e.f, "1300"); len(got) != 1 {
				t.Errorf("%d messages requests, want 1:\n%s", len(got), discordfake.Describe(e.f.Requests()))
			}
			var prompt []string
			for _, m := range e.llm.Requests()[0].Messages {
				prompt = append(prompt, m.Role+": "+m.Content)
			}
			all := strings.Join(prompt, "\n")
			for _, want := range []string{"Math Class wrote", "humma humma humma", "victim wrote", "assistant: I deployed v1.1 yesterday."} {
				if strings.Contains(all, want) == refused {
					t.Errorf("model's first request has %q: %v, want %v:\n%s", want, !refused, !refused, all)
				}
			}
			if !strings.Contains(all, "what is left to do?") {
				t.Errorf("model's first request lacks the goal:\n%s", all)
			}
			if strings.Contains(all, "after the mention") {
				t.Errorf("model's first request has what came after the mention:\n%s", all)
			}
		})
	}
}

// FuzzHistoryOf: whatever Discord (or something posing as it) answers, the history stays
// within the bot's bounds, has no empty text, and names no one on the bot's own messages.
func FuzzHistoryOf(f *testing.F) {
	raw, err := os.ReadFile("testdata/channel_messages.json")
	if err != nil {
		f.Fatal(err)
	}
	var fx struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(fx.Messages), histMention)
	f.Add([]byte(`[{"id":"1","content":"<@`+discordfake.BotID+`> hi","author":{"id":"`+discordfake.BotID+`"}},{"id":"2","type":7,"author":{"id":"3"}}]`), "")
	f.Fuzz(func(t *testing.T, page []byte, before string) {
		var msgs []*discordgo.Message
		if json.Unmarshal(page, &msgs) != nil {
			return
		}
		h := historyOf(msgs, discordfake.BotID, before)
		n := 0
		for _, m := range h.Messages {
			n += len(m.Text)
			if m.Text == "" || (m.Bot && m.Name != "") {
				t.Errorf("message %+v", m)
			}
		}
		if n > bot.MaxHistoryBytes || len(h.Messages) > bot.MaxHistoryMessages {
			t.Errorf("%d messages of %d bytes", len(h.Messages), n)
		}
	})
}
