package discord

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
	"github.com/loopbot/loopbot/bot"
)

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeInteraction(t *testing.T) {
	dm := discordfake.SlashPayload("1001", "t", "42", "", "loopbot", discordfake.GoalOption("in a dm"))
	delete(dm, "guild_id")
	delete(dm, "member")
	dm["user"] = map[string]any{"id": "77", "username": "dmuser", "global_name": "DM User"}
	dm["channel"] = map[string]any{"id": "42", "type": 1}
	other := discordfake.SlashPayload("1002", "t", discordfake.Channel, "", "someone-elses")
	select_ := discordfake.ButtonPayload("1003", "t", "700", discordfake.Channel, "701", "x", "5")
	select_["data"] = map[string]any{"custom_id": "menu", "component_type": 3, "values": []string{"a"}}
	noChannel := discordfake.ButtonPayload("1004", "t", "700", discordfake.Channel, "701", "abc", "5")
	delete(noChannel, "channel")
	botUser := discordfake.ButtonPayload("1005", "t", "700", discordfake.Channel, "701", "abc", "5")
	botUser["member"] = map[string]any{"user": map[string]any{"id": "5", "username": "otherbot", "bot": true}}
	tests := []struct {
		name    string
		payload map[string]any
		want    bot.Event
		private bool
		err     error
	}{
		{name: "start in a channel", payload: discordfake.SlashPayload("1000", "t", discordfake.Channel, "", "loopbot", discordfake.GoalOption("  do it  ")),
			want: bot.Event{Kind: bot.EventCommand, Command: bot.CommandStart, ID: "1000", Text: "do it", User: bot.User{ID: discordfake.UserID, Name: "Alice"},
				Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: discordfake.Channel}}},
		{name: "start in a thread", payload: discordfake.SlashPayload("1000", "t", "700", discordfake.Channel, "loopbot", discordfake.GoalOption("more")),
			want: bot.Event{Kind: bot.EventCommand, Command: bot.CommandStart, ID: "1000", Text: "more", User: bot.User{ID: discordfake.UserID, Name: "Alice"},
				Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: discordfake.Channel, Thread: "700"}}},
		{name: "playbooks in a channel", payload: discordfake.SlashPayload("1000", "t", discordfake.Channel, "", "loopbot", discordfake.GoalOption("playbooks")), private: true,
			want: bot.Event{Kind: bot.EventCommand, Command: bot.CommandStart, ID: "1000", Text: "playbooks", User: bot.User{ID: discordfake.UserID, Name: "Alice"},
				Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: discordfake.Channel, Thread: discordfake.Channel}}},
		{name: "start in a DM", payload: dm,
			want: bot.Event{Kind: bot.EventCommand, Command: bot.CommandStart, ID: "1001", Text: "in a dm", User: bot.User{ID: "77", Name: "DM User"},
				Thread: bot.ThreadRef{Platform: "discord", Channel: "42", Thread: "42"}}},
		{name: "cancel in a thread", payload: discordfake.SlashPayload("1000", "t", "700", discordfake.Channel, "loopbot-cancel"), private: true,
			want: bot.Event{Kind: bot.EventCommand, Command: bot.CommandCancel, ID: "1000", User: bot.User{ID: discordfake.UserID, Name: "Alice"},
				Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: discordfake.Channel, Thread: "700"}}},
		{name: "status in a channel", payload: discordfake.SlashPayload("1000", "t", discordfake.Channel, "", "loopbot-status"), private: true,
			want: bot.Event{Kind: bot.EventCommand, Command: bot.CommandStatus, ID: "1000", User: bot.User{ID: discordfake.UserID, Name: "Alice"},
				Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: discordfake.Channel, Thread: discordfake.Channel}}},
		{name: "autonomy in a thread", payload: discordfake.SlashPayload("1000", "t", "700", discordfake.Channel, "loopbot-autonomy",
			map[string]any{"name": "level", "type": 3, "value": "careful"}), private: true,
			want: bot.Event{Kind: bot.EventCommand, Command: bot.CommandAutonomy, Text: "careful", ID: "1000", User: bot.User{ID: discordfake.UserID, Name: "Alice"},
				Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: discordfake.Channel, Thread: "700"}}},
		{name: "autonomy shown in a channel", payload: discordfake.SlashPayload("1000", "t", discordfake.Channel, "", "loopbot-autonomy"), private: true,
			want: bot.Event{Kind: bot.EventCommand, Command: bot.CommandAutonomy, ID: "1000", User: bot.User{ID: discordfake.UserID, Name: "Alice"},
				Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: discordfake.Channel, Thread: discordfake.Channel}}},
		{name: "button", payload: discordfake.ButtonPayload("1000", "t", "700", discordfake.Channel, "701", "opaque", "5"),
			want: bot.Event{Kind: bot.EventAction, ActionID: "opaque", ID: "1000", User: bot.User{ID: "5", Name: "user-5"},
				Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: discordfake.Channel, Thread: "700"}}},
		{name: "button without the channel object", payload: noChannel,
			want: bot.Event{Kind: bot.EventAction, ActionID: "abc", ID: "1004", User: bot.User{ID: "5", Name: "user-5"},
				Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: "700", Thread: "700"}}},
		{name: "button by a bot", payload: botUser,
			want: bot.Event{Kind: bot.EventAction, ActionID: "abc", ID: "1005", User: bot.User{ID: "5", Name: "otherbot", Bot: true},
				Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: discordfake.Channel, Thread: "700"}}},
		{name: "another app's command", payload: other, err: errIgnored},
		{name: "select menu", payload: select_, err: errIgnored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := decodeInteraction(mustJSON(t, tt.payload))
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			in.ev.At = in.ev.At.UTC()
			if in.ev.At.IsZero() {
				t.Error("no time from the snowflake")
			}
			tt.want.At = in.ev.At
			if in.ev != tt.want || in.private != tt.private {
				t.Errorf("\n got %+v private=%v\nwant %+v private=%v", in.ev, in.private, tt.want, tt.private)
			}
		})
	}
}

func TestDecodeInteractionRejects(t *testing.T) {
	for _, raw := range []string{
		`not json`,
		`{"type":2}`,
		`{"id":"1","type":2,"token":"t","channel_id":"3","data":{"name":"loopbot"}}`, // no user
		`{"id":"1","type":3,"token":"t","channel_id":"3","data":"x"}`,
	} {
		if _, err := decodeInteraction([]byte(raw)); err == nil || errors.Is(err, errIgnored) {
			t.Errorf("%s: err %v, want a decoding error", raw, err)
		}
	}
	in, err := decodeInteraction([]byte(`{"id":"1","type":1,"token":"t"}`))
	if err != nil || !in.ping {
		t.Errorf("ping: %+v, %v", in, err)
	}
}

func TestDecodeMessage(t *testing.T) {
	own := discordfake.MessagePayload("1", discordfake.Channel, "hi")
	own["author"] = map[string]any{"id": discordfake.BotID, "bot": true}
	otherBot := discordfake.MessagePayload("1", discordfake.Channel, "<@"+discordfake.BotID+"> hi", discordfake.BotID)
	otherBot["author"] = map[string]any{"id": "9", "bot": true}
	webhook := discordfake.MessagePayload("1", discordfake.Channel, "hi")
	webhook["webhook_id"] = "5"
	system := discordfake.MessagePayload("1", discordfake.Channel, "hi")
	system["type"] = 18 // thread created
	noContent := discordfake.MessagePayload("1", discordfake.Channel, "")
	dm := discordfake.MessagePayload("1", "42", "hello")
	delete(dm, "guild_id")
	tests := []struct {
		name      string
		payload   map[string]any
		text      string
		mentioned bool
		dm        bool
		err       error
	}{
		{name: "mention", payload: discordfake.MessagePayload("1", discordfake.Channel, "<@"+discordfake.BotID+"> fix <@!"+discordfake.BotID+"> it", discordfake.BotID), text: "fix  it", mentioned: true},
		{name: "plain", payload: discordfake.MessagePayload("1", discordfake.Channel, "just talk"), text: "just talk"},
		{name: "dm", payload: dm, text: "hello", dm: true},
		{name: "bare mention", payload: discordfake.MessagePayload("1", discordfake.Channel, "<@"+discordfake.BotID+">", discordfake.BotID), mentioned: true},
		{name: "own message", payload: own, err: errIgnored},
		{name: "other bot", payload: otherBot, err: errIgnored},
		{name: "webhook", payload: webhook, err: errIgnored},
		{name: "system message", payload: system, err: errIgnored},
		{name: "no content (no intent)", payload: noContent, err: errIgnored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := decodeMessage(mustJSON(t, tt.payload), discordfake.BotID)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.ev.Text != tt.text || m.mentioned != tt.mentioned || m.dm != tt.dm || m.ev.User.ID != discordfake.UserID {
				t.Errorf("got %+v", m)
			}
		})
	}
}

func FuzzDecodeInteraction(f *testing.F) {
	for _, p := range []map[string]any{
		discordfake.SlashPayload("1000", "t", discordfake.Channel, "", "loopbot", discordfake.GoalOption("goal")),
		discordfake.SlashPayload("1000", "t", "700", discordfake.Channel, "loopbot-status"),
		discordfake.ButtonPayload("1000", "t", "700", discordfake.Channel, "701", "opaque", "5"),
	} {
		f.Add(mustJSON(f, p))
	}
	f.Add([]byte(`{"id":"1","type":1,"token":"t"}`))
	f.Add([]byte(`{"type":2,"data":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := decodeInteraction(raw)
		if err != nil || in.ping {
			return
		}
		ev := in.ev
		if ev.Thread.Thread == "" {
			// A start outside a thread: the adapter opens one before the event goes on.
			if ev.Command != bot.CommandStart {
				t.Fatalf("event without a thread: %+v", ev)
			}
			ev.Thread.Thread = "1"
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("decoded an invalid event: %v\n%+v", err, ev)
		}
		if ev.Kind == bot.EventAction && ev.ActionID == "" {
			t.Fatal("action without an ID")
		}
		_ = deferredResponse(in)
	})
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(mustJSON(f, discordfake.MessagePayload("1", discordfake.Channel, "<@"+discordfake.BotID+"> go", discordfake.BotID)))
	f.Add([]byte(`{"id":"1","channel_id":"2","author":{"id":"3"},"content":"x","type":19}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := decodeMessage(raw, discordfake.BotID)
		if err != nil {
			return
		}
		if m.ev.User.ID == discordfake.BotID || m.ev.User.Bot {
			t.Fatal("a bot's message got through")
		}
		if strings.Contains(m.ev.Text, "<@"+discordfake.BotID+">") {
			t.Fatal("the bot's mention was left in the text")
		}
	})
}

func FuzzVerifySignature(f *testing.F) {
	f.Add("00", "1800000000", []byte(`{}`))
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		key := make([]byte, 32)
		if verifySignature(key, sig, ts, body, snowflakeTime("1")) && len(sig) != 128 {
			t.Fatal("accepted a malformed signature")
		}
	})
}
