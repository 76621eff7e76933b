package slack

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

var self = identity{UserID: botUserID, BotID: botBotID}

// callbackJSON wraps an inner event the way Slack's Events API does.
func callbackJSON(inner string) []byte {
	return []byte(`{"token":"x","team_id":"T1","api_app_id":"A1","type":"event_callback","event_id":"Ev1","event_time":1700000000,"event":` + inner + `}`)
}

func TestDecodeEvent(t *testing.T) {
	th := func(ch, ts string) bot.ThreadRef {
		return bot.ThreadRef{Platform: "slack", Workspace: "T1", Channel: ch, Thread: ts}
	}
	tests := []struct {
		name  string
		inner string
		want  *bot.Event // nil: ignored
	}{
		{"mention starts a thread under it",
			`{"type":"app_mention","user":"U1","text":"<@UBOT> deploy &lt;staging&gt;","ts":"1700000000.000100","channel":"C1"}`,
			&bot.Event{Kind: bot.EventMention, Thread: th("C1", "1700000000.000100"), Text: "deploy <staging>"}},
		{"mention inside a thread runs in that thread",
			`{"type":"app_mention","user":"U1","text":"hey <@UBOT|loopbot> more","ts":"1700000005.000100","thread_ts":"1700000000.000100","channel":"C1"}`,
			&bot.Event{Kind: bot.EventMention, Thread: th("C1", "1700000000.000100"), Text: "hey  more"}},
		{"mention status command",
			`{"type":"app_mention","user":"U1","text":"<@UBOT>  Status ","ts":"1700000005.000100","thread_ts":"1700000000.000100","channel":"C1"}`,
			&bot.Event{Kind: bot.EventCommand, Command: bot.CommandStatus, Thread: th("C1", "1700000000.000100")}},
		{"mention cancel command",
			`{"type":"app_mention","user":"U1","text":"<@UBOT> cancel","ts":"1700000005.000100","thread_ts":"1700000000.000100","channel":"C1"}`,
			&bot.Event{Kind: bot.EventCommand, Command: bot.CommandCancel, Thread: th("C1", "1700000000.000100")}},
		{"mention autonomy command",
			`{"type":"app_mention","user":"U1","text":"<@UBOT> autonomy  Careful","ts":"1700000005.000100","channel":"C1"}`,
			&bot.Event{Kind: bot.EventCommand, Command: bot.CommandAutonomy, Text: "Careful", Thread: th("C1", "1700000005.000100")}},
		{"mention autonomy without a level",
			`{"type":"app_mention","user":"U1","text":"<@UBOT> autonomy","ts":"1700000005.000100","channel":"C1"}`,
			&bot.Event{Kind: bot.EventCommand, Command: bot.CommandAutonomy, Thread: th("C1", "1700000005.000100")}},
		{"a goal that starts with the word",
			`{"type":"app_mention","user":"U1","text":"<@UBOT> autonomyless goal","ts":"1700000005.000100","channel":"C1"}`,
			&bot.Event{Kind: bot.EventMention, Text: "autonomyless goal", Thread: th("C1", "1700000005.000100")}},
		{"other user's mention stays",
			`{"type":"app_mention","user":"U1","text":"<@UBOT> ask <@UBOTX>","ts":"1.000001","channel":"C1"}`,
			&bot.Event{Kind: bot.EventMention, Thread: th("C1", "1.000001"), Text: "ask <@UBOTX>"}},
		{"reply in a thread",
			`{"type":"message","channel_type":"channel","user":"U1","text":"yes, main","ts":"1700000009.000100","thread_ts":"1700000000.000100","channel":"C1"}`,
			&bot.Event{Kind: bot.EventReply, Thread: th("C1", "1700000000.000100"), Text: "yes, main"}},
		{"thread broadcast is a reply",
			`{"type":"message","subtype":"thread_broadcast","channel_type":"group","user":"U1","text":"ok","ts":"1700000009.000100","thread_ts":"1700000000.000100","channel":"G1"}`,
			&bot.Event{Kind: bot.EventReply, Thread: th("G1", "1700000000.000100"), Text: "ok"}},
		{"DM starts a run",
			`{"type":"message","channel_type":"im","user":"U1","text":"summarise","ts":"1700000009.000100","channel":"D1"}`,
			&bot.Event{Kind: bot.EventMention, Thread: th("D1", "1700000009.000100"), Text: "summarise", Direct: true}},
		{"DM in a thread continues",
			`{"type":"message","channel_type":"im","user":"U1","text":"and more","ts":"1700000019.000100","thread_ts":"1700000009.000100","channel":"D1"}`,
			&bot.Event{Kind: bot.EventReply, Thread: th("D1", "1700000009.000100"), Text: "and more", Direct: true}},
		{"channel message outside a thread", `{"type":"message","channel_type":"channel","user":"U1","text":"hi","ts":"1.000001","channel":"C1"}`, nil},
		{"thread parent", `{"type":"message","channel_type":"channel","user":"U1","text":"hi","ts":"1.000001","thread_ts":"1.000001","channel":"C1"}`, nil},
		{"thread reply that mentions the bot (app_mention covers it)", `{"type":"message","channel_type":"channel","user":"U1","text":"<@UBOT> hi","ts":"2.000001","thread_ts":"1.000001","channel":"C1"}`, nil},
		{"edit", `{"type":"message","subtype":"message_changed","channel_type":"channel","ts":"2.000001","channel":"C1","message":{"user":"U1","text":"x","thread_ts":"1.000001"}}`, nil},
		{"delete", `{"type":"message","subtype":"message_deleted","channel_type":"channel","ts":"2.000001","thread_ts":"1.000001","channel":"C1"}`, nil},
		{"own message", `{"type":"message","channel_type":"channel","user":"UBOT","bot_id":"BBOT","text":"answer","ts":"2.000001","thread_ts":"1.000001","channel":"C1"}`, nil},
		{"other bot", `{"type":"message","subtype":"bot_message","channel_type":"channel","bot_id":"B9","text":"beep","ts":"2.000001","thread_ts":"1.000001","channel":"C1"}`, nil},
		{"other bot with a user", `{"type":"app_mention","user":"U7","bot_id":"B7","text":"<@UBOT> loop","ts":"2.000001","channel":"C1"}`, nil},
		{"app_mention in a DM (message.im covers it)", `{"type":"app_mention","user":"U1","text":"<@UBOT> x","ts":"2.000001","channel":"D1"}`, nil},
		{"other event type", `{"type":"reaction_added","user":"U1","item":{}}`, nil},
		{"edited mention", `{"type":"app_mention","user":"U1","text":"<@UBOT> x","ts":"2.000001","channel":"C1","edited":{"user":"U1","ts":"3.000000"}}`, nil},
		{"edited reply", `{"type":"message","channel_type":"channel","user":"U1","text":"x","ts":"2.000001","thread_ts":"1.000001","channel":"C1","edited":{"user":"U1","ts":"3.000000"}}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, ok, err := decodeEvent(callbackJSON(tc.inner), self)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if ok {
					t.Fatalf("not ignored: %+v", ev)
				}
				return
			}
			want := *tc.want
			want.ID, want.User = "Ev1", bot.User{ID: "U1"}
			want.At = ev.At
			if !ok || ev != want {
				t.Fatalf("got  %+v (ok %v)\nwant %+v", ev, ok, want)
			}
			if err := ev.Validate(); err != nil {
				t.Errorf("invalid event: %v", err)
			}
		})
	}
}

// TestDecodeEventTeam: the thread's workspace is the app's own team, not the team_id of
// the envelope, which in a Slack Connect channel is the acting member's organisation. The
// callback shape (authorizations with the installation's team) is the one Slack documents
// for every Events API delivery and slackapi/bolt-python#1107 shows from a Connect channel.
func TestDecodeEventTeam(t *testing.T) {
	body := []byte(`{"token":"x","team_id":"T0EXTERNAL","api_app_id":"A1","type":"event_callback","event_id":"Ev1","event_time":1700000000,` +
		`"event":{"type":"app_mention","user":"W0EXT","team":"T0EXTERNAL","text":"<@UBOT> hi","ts":"1700000000.000100","channel":"C1"},` +
		`"authorizations":[{"enterprise_id":null,"team_id":"T1","user_id":"UBOT","is_bot":true,"is_enterprise_install":false}],` +
		`"is_ext_shared_channel":true}`)
	for _, tc := range []struct {
		name string
		self identity
		body []byte
		want string
	}{
		{"from authorizations", identity{UserID: botUserID}, body, "T1"},
		{"the installation's team wins", identity{UserID: botUserID, TeamID: "T1"}, body, "T1"},
		{"no authorizations", identity{UserID: botUserID, TeamID: "T1"}, bytes.Replace(body, []byte(`"authorizations"`), []byte(`"other"`), 1), "T1"},
		{"authorizations only", identity{UserID: botUserID}, bytes.Replace(body, []byte(`"T0EXTERNAL","api_app_id"`), []byte(`"T1","api_app_id"`), 1), "T1"},
	} {
		ev, ok, err := decodeEvent(tc.body, tc.self)
		if err != nil || !ok || ev.Thread.Workspace != tc.want {
			t.Errorf("%s: workspace %q (ok %v, err %v), want %q", tc.name, ev.Thread.Workspace, ok, err, tc.want)
		}
	}
}

func TestDecodeEventErrors(t *testing.T) {
	for _, body := range []string{
		``, `[]`, `{"type":"event_callback"}`,
		`{"type":"event_callback","event_id":"E","event":"x"}`,
		`{"type":"event_callback","event_id":"E","event":{"type":"app_mention","user":"U1"}}`,
	} {
		if _, ok, err := decodeEvent([]byte(body), self); err == nil || ok {
			t.Errorf("%s: ok %v err %v, want an error", body, ok, err)
		}
	}
	if _, ok, err := decodeEvent([]byte(`{"type":"app_rate_limited","minute_rate_limited":1}`), self); err != nil || ok {
		t.Errorf("app_rate_limited: ok %v err %v", ok, err)
	}
}

func TestDecodeInteraction(t *testing.T) {
	p, _ := json.Marshal(clickPayload("trig-1", "opaque"))
	ev, ok, err := decodeInteraction(p)
	if err != nil || !ok || ev.ActionID != "opaque" || ev.ID != "action:trig-1" || ev.Thread.Thread != "1700000000.000100" || ev.User.Name != "bea" {
		t.Fatalf("%+v %v %v", ev, ok, err)
	}
	for name, body := range map[string]string{
		"view submission": `{"type":"view_submission","trigger_id":"t","user":{"id":"U1"}}`,
		"foreign button":  `{"type":"block_actions","trigger_id":"t","user":{"id":"U1"},"channel":{"id":"C1"},"message":{"ts":"1.1"},"actions":[{"action_id":"other_app","value":"v"}]}`,
		"no value":        `{"type":"block_actions","trigger_id":"t","user":{"id":"U1"},"channel":{"id":"C1"},"message":{"ts":"1.1"},"actions":[{"action_id":"loopbot_button_0"}]}`,
	} {
		if _, ok, err := decodeInteraction([]byte(body)); ok || err != nil {
			t.Errorf("%s: ok %v err %v, want ignored", name, ok, err)
		}
	}
	if _, _, err := decodeInteraction([]byte(`{"type":"block_actions","actions":[{"action_id":"loopbot_button_0","value":"v"}]}`)); err == nil {
		t.Error("a click without user or channel decoded")
	}
}

func TestDecodeCommand(t *testing.T) {
	base := slashCommand{TeamID: "T1", ChannelID: "C1", UserID: "U1", UserName: "ann", Command: "/loopbot", TriggerID: "tr", ResponseURL: "https://hooks.slack.com/x"}
	tests := []struct {
		text, command, thread, channel, goal string
		reply                                bool
	}{
		{text: "fix the build", command: bot.CommandStart, goal: "fix the build"},
		// The playbook list is the asker's alone: no root message for it.
		{text: "playbooks", command: bot.CommandStart, thread: "C1"},
		{text: "status 1700000000.000100", command: bot.CommandStatus, thread: "1700000000.000100"},
		{text: "Cancel <https://acme.slack.com/archives/C1/p1700000009000200?thread_ts=1700000000.000100&cid=C1>", command: bot.CommandCancel, thread: "1700000000.000100"},
		{text: "status https://acme.slack.com/archives/C1/p1700000000000100", command: bot.CommandStatus, thread: "1700000000.000100"},
		// A link to a thread of another channel is answered only there: the asker may not
		// see that channel.
		{text: "status https://acme.slack.com/archives/C3/p1700000000000100", reply: true},
		{text: "Cancel <https://acme.slack.com/archives/C2/p1700000009000200?thread_ts=1700000000.000100&cid=C2>", reply: true},
		{text: "status", reply: true},
		{text: "cancel not-a-link", reply: true},
		{text: "", reply: true},
		{text: "help", reply: true},
		// The autonomy command is about the channel, which stands for its thread.
		{text: "autonomy bold", command: bot.CommandAutonomy, thread: "C1"},
		{text: "AUTONOMY", command: bot.CommandAutonomy, thread: "C1"},
	}
	for _, tc := range tests {
		sc := base
		sc.Text = tc.text
		c, err := decodeCommand(sc, "/loopbot")
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		if tc.reply {
			if c.reply == "" {
				t.Errorf("%q: no reply", tc.text)
			}
			continue
		}
		ch := firstOf(tc.channel, "C1")
		if c.reply != "" || c.ev.Command != tc.command || c.ev.Thread.Thread != tc.thread || c.ev.Thread.Channel != ch || c.goal != tc.goal || c.ev.ID != "command:tr" || c.responseURL != base.ResponseURL {
			t.Errorf("%q: %+v", tc.text, c)
		}
	}
	// Only the configured command is taken; another is answered, whatever its text.
	for _, cmd := range []string{"/deploy", "/loopbotx", "", "/loop"} {
		sc := base
		sc.Command, sc.Text = cmd, "fix the build"
		c, err := decodeCommand(sc, "/loopbot")
		if err != nil || c.goal != "" || c.ev.Command != "" || !strings.Contains(c.reply, "not loopbot's") {
			t.Errorf("command %q: %+v %v, want the other-command reply", cmd, c, err)
		}
	}
	sc := base
	sc.Command, sc.Text = "/ask", "fix the build"
	if c, err := decodeCommand(sc, "/ask"); err != nil || c.goal != "fix the build" {
		t.Errorf("configured /ask: %+v %v, want a start", c, err)
	}
	if _, err := decodeCommand(slashCommand{Text: "x"}, "/loopbot"); err == nil {
		t.Error("command without trigger decoded")
	}
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(callbackJSON(`{"type":"app_mention","user":"U1","text":"<@UBOT> x","ts":"1.000001","channel":"C1"}`))
	f.Add(callbackJSON(`{"type":"message","channel_type":"im","user":"U1","text":"<@UBOT","ts":"1.1","thread_ts":"0.1","channel":"D1"}`))
	f.Add([]byte(`{"type":"url_verification","challenge":"c"}`))
	f.Add(callbackJSON(`{"type":"app_mention","user":"U1","text":"<@UBOT> x","ts":"1.000001","channel":"C1","edited":{"user":"U1","ts":"2.0"}}`))
	f.Add([]byte(`{"type":"event_callback","team_id":"T2","event_id":"E","authorizations":[{"team_id":"T1"}],"event":{"type":"app_mention","user":"U1","text":"x","ts":"1.1","channel":"C1"}}`))
	f.Add(callbackJSON(`{"type":"assistant_thread_started","assistant_thread":{"user_id":"U1","channel_id":"D1","thread_ts":"1.1"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, ok, err := decodeEvent(body, self)
		if err != nil && ok {
			t.Fatal("ok with an error")
		}
		if ok {
			if verr := ev.Validate(); verr != nil {
				t.Fatalf("decoded an invalid event %+v: %v", ev, verr)
			}
		}
		id, thread, ok, err := decodeThreadStarted(body)
		if err != nil && ok {
			t.Fatal("thread start ok with an error")
		}
		if ok && (id == "" || !thread.Valid()) {
			t.Fatalf("decoded a thread start without its event or thread: %q %+v", id, thread)
		}
	})
}

func FuzzDecodeInteraction(f *testing.F) {
	p, _ := json.Marshal(clickPayload("trig", "v"))
	f.Add(p)
	f.Add([]byte(`{"type":"block_actions","actions":[{"action_id":"loopbot_button_1","value":"x"}],"container":{"channel_id":"C","message_ts":"1"},"user":{"id":"U"}}`))
	f.Add(fixture(f, "events/view_submission.json"))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, ok, err := decodeInteraction(body)
		if ok {
			// A click may ask for a reason; whatever the payload, that only opens a modal.
			_, _ = askedReason(body, ev)
		}
		if err != nil && ok {
			t.Fatal("ok with an error")
		}
		if ok {
			if verr := ev.Validate(); verr != nil {
				t.Fatalf("decoded an invalid event %+v: %v", ev, verr)
			}
		}
	})
}

func FuzzDecodeCommand(f *testing.F) {
	f.Add("team_id=T1&channel_id=C1&user_id=U1&command=%2Floopbot&text=status+https%3A%2F%2Fa.slack.com%2Farchives%2FC1%2Fp1700000000000100&trigger_id=t")
	f.Add("channel_id=C1&user_id=U1&text=go&trigger_id=t")
	f.Fuzz(func(t *testing.T, form string) {
		v, err := url.ParseQuery(form)
		if err != nil {
			return
		}
		c, err := decodeCommand(slashFromForm(v), "/loopbot")
		if err != nil || c.reply != "" {
			return
		}
		if c.goal == "" {
			if verr := c.ev.Validate(); verr != nil {
				t.Fatalf("decoded an invalid command %+v: %v", c.ev, verr)
			}
		}
	})
}

// TestDecodeFeedbackClick decodes a click on Slack's feedback buttons like any button's: by
// the clicked button's value, the rating's opaque ID.
func TestDecodeFeedbackClick(t *testing.T) {
	ev, ok, err := decodeInteraction(fixture(t, "events/block_actions_feedback.json"))
	if err != nil || !ok {
		t.Fatalf("ok %v err %v", ok, err)
	}
	want := bot.Event{Kind: bot.EventAction, ID: "action:1234567890.987654321.feedbackabc", User: bot.User{ID: "U1", Name: "ann"},
		Thread: bot.ThreadRef{Platform: "slack", Workspace: "T1", Channel: "D1", Thread: "1700000000.000100"}, ActionID: "down000000000000000000000000000b", At: ev.At}
	if ev != want {
		t.Errorf("decoded %+v\nwant    %+v", ev, want)
	}
}

func TestDecodeThreadStarted(t *testing.T) {
	id, thread, ok, err := decodeThreadStarted(fixture(t, "events/assistant_thread_started.json"))
	if err != nil || !ok || id != "Ev0ASSIST1" || thread != (bot.ThreadRef{Platform: "slack", Workspace: "T1", Channel: "D123ABC456", Thread: "1729999327.187299"}) {
		t.Errorf("decoded %q %+v %v %v", id, thread, ok, err)
	}
	for name, body := range map[string]string{
		"a mention":  `{"type":"event_callback","event_id":"E1","event":{"type":"app_mention","channel":"C1","ts":"1.1","user":"U1"}}`,
		"not json":   `{`,
		"a url test": `{"type":"url_verification","challenge":"x"}`,
	} {
		if _, _, ok, err := decodeThreadStarted([]byte(body)); ok || err != nil {
			t.Errorf("%s: ok %v err %v, want ignored", name, ok, err)
		}
	}
	if _, _, ok, err := decodeThreadStarted([]byte(`{"type":"event_callback","event_id":"E1","event":{"type":"assistant_thread_started","assistant_thread":{"user_id":"U1"}}}`)); ok || err == nil {
		t.Errorf("a thread start without its thread: ok %v err %v, want an error", ok, err)
	}
}
