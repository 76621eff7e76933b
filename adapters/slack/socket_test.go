package slack

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

func TestSocketMention(t *testing.T) {
	f := newFakeSlack(t)
	rec := newRecorder()
	f.adapter(rec, Config{})
	f.conn()

	f.send("events_api", "env-1", mentionCallback("Ev1", "C1", "1700000000.000100", "", "<@UBOT> summarise the open issues &amp; PRs"))
	if a := f.nextAck(); a.EnvelopeID != "env-1" {
		t.Fatalf("ack for %q, want env-1", a.EnvelopeID)
	}
	ev := rec.next(t)
	want := bot.Event{
		Kind:   bot.EventMention,
		ID:     "Ev1",
		Thread: bot.ThreadRef{Platform: "slack", Workspace: teamID, Channel: "C1", Thread: "1700000000.000100"},
		User:   bot.User{ID: "U1"},
		Text:   "summarise the open issues & PRs",
		At:     time.Unix(1700000000, 100_000).UTC(),
	}
	if ev != want {
		t.Errorf("event\n got %+v\nwant %+v", ev, want)
	}
}

// TestSocketHandleFailureIsToldToThePerson fails Handle for an acknowledged mention, as a
// full disk would: Slack will not deliver it again, so the person is told to try again.
func TestSocketHandleFailureIsToldToThePerson(t *testing.T) {
	f := newFakeSlack(t)
	rec := newRecorder()
	rec.before = func(bot.Event) error { return errors.New("store update: no space left on device") }
	f.adapter(rec, Config{})
	f.conn()
	f.send("events_api", "env-1", mentionCallback("Ev1", "C1", "1700000000.000100", "", "<@UBOT> go"))
	f.nextAck()
	c := f.nextCall("chat.postEphemeral")
	if got := c.Values.Get("user"); got != "U1" {
		t.Errorf("notice to %q, want the person who mentioned loopbot (U1)", got)
	}
	if text := c.Values.Get("text") + c.Values.Get("blocks"); !strings.Contains(text, "could not take this in") || strings.Contains(text, "no space") {
		t.Errorf("notice %q: want the safe summary, not the error", text)
	}
}

// TestSocketAckBeforeHandle holds Handle until the fake Slack has read the envelope's
// acknowledgement: were the ack sent after Handle, Handle would report that it never saw it.
func TestSocketAckBeforeHandle(t *testing.T) {
	f := newFakeSlack(t)
	acked := make(chan struct{})
	rec := newRecorder()
	rec.before = func(ev bot.Event) error {
		select {
		case <-acked:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("handled before the ack reached Slack")
		}
	}
	f.adapter(rec, Config{})
	f.conn()
	f.send("events_api", "env-1", mentionCallback("Ev1", "C1", "1700000000.000100", "", "<@UBOT> go"))
	if a := f.nextAck(); a.EnvelopeID != "env-1" {
		t.Fatalf("ack for %q", a.EnvelopeID)
	}
	close(acked)
	if ev := rec.next(t); ev.ID != "Ev1" {
		t.Fatalf("handled %q", ev.ID)
	}
}

// TestSocketRedelivery: a retry of a delivery reaches Handle again with the same ID (the
// bot dedupes on it) and is acknowledged again.
func TestSocketRedelivery(t *testing.T) {
	f := newFakeSlack(t)
	rec := newRecorder()
	f.adapter(rec, Config{})
	f.conn()
	cb := mentionCallback("Ev7", "C1", "1700000000.000100", "", "<@UBOT> go")
	f.send("events_api", "env-a", cb)
	f.send("events_api", "env-b", cb)
	for _, want := range []string{"env-a", "env-b"} {
		if a := f.nextAck(); a.EnvelopeID != want {
			t.Fatalf("ack %q, want %q", a.EnvelopeID, want)
		}
	}
	for range 2 {
		if ev := rec.next(t); ev.ID != "Ev7" {
			t.Fatalf("event ID %q, want Ev7", ev.ID)
		}
	}
}

func TestSocketClickNotice(t *testing.T) {
	f := newFakeSlack(t)
	rec := newRecorder()
	rec.result = func(bot.Event) bot.Result { return bot.Result{Notice: "Already approved by ann <@U9>."} }
	f.adapter(rec, Config{})
	f.conn()
	f.send("interactive", "env-click", clickPayload("trig-1", "opaque-approve-id"))
	f.nextAck()
	ev := rec.next(t)
	want := bot.Event{
		Kind:     bot.EventAction,
		ID:       "action:trig-1",
		Thread:   bot.ThreadRef{Platform: "slack", Workspace: teamID, Channel: "C1", Thread: "1700000000.000100"},
		User:     bot.User{ID: "U2", Name: "bea"},
		ActionID: "opaque-approve-id",
		At:       time.Unix(1700000002, 300_000).UTC(),
	}
	if ev != want {
		t.Errorf("event\n got %+v\nwant %+v", ev, want)
	}
	c := f.nextCall("chat.postEphemeral")
	for k, v := range map[string]string{"channel": "C1", "user": "U2", "thread_ts": "1700000000.000100", "text": "Already approved by ann &lt;@U9&gt;."} {
		if got := c.Values.Get(k); got != v {
			t.Errorf("postEphemeral %s = %q, want %q", k, got, v)
		}
	}
}

// TestSocketReconnect drops the connection twice (Slack's refresh_requested, then an abrupt
// close) while an acknowledged event is still in Handle: every event is handled exactly
// once and the ones after each reconnect arrive on the new connection.
func TestSocketReconnect(t *testing.T) {
	f := newFakeSlack(t)
	release := make(chan struct{})
	rec := newRecorder()
	rec.before = func(ev bot.Event) error {
		if ev.ID == "EvSlow" {
			<-release
		}
		return nil
	}
	f.adapter(rec, Config{})
	f.conn()

	f.send("events_api", "env-slow", mentionCallback("EvSlow", "C1", "1700000000.000100", "", "<@UBOT> slow"))
	if a := f.nextAck(); a.EnvelopeID != "env-slow" {
		t.Fatalf("ack %q", a.EnvelopeID)
	}
	// Slack asks for a refresh while EvSlow is still being handled.
	if err := f.SendDisconnect("refresh_requested"); err != nil {
		t.Fatal(err)
	}
	f.conn()
	f.send("events_api", "env-2", mentionCallback("Ev2", "C2", "1700000000.000200", "", "<@UBOT> two"))
	f.nextAck()

	// An abrupt close, then an event on the third connection.
	if err := f.DropConnection(); err != nil {
		t.Fatal(err)
	}
	f.conn()
	f.send("events_api", "env-3", mentionCallback("Ev3", "C3", "1700000000.000300", "", "<@UBOT> three"))
	f.nextAck()
	close(release)

	seen := map[string]int{}
	for range 3 {
		seen[rec.next(t).ID]++
	}
	for _, id := range []string{"EvSlow", "Ev2", "Ev3"} {
		if seen[id] != 1 {
			t.Errorf("%s handled %d times, want once (all: %v)", id, seen[id], seen)
		}
	}
	rec.none(t)
}

// TestSocketUnparsable: envelopes slack-go cannot parse are acknowledged, so Slack stops
// delivering them, and do not reach Handle; the next good one does.
func TestSocketUnparsable(t *testing.T) {
	f := newFakeSlack(t)
	rec := newRecorder()
	f.adapter(rec, Config{})
	f.conn()
	frames := []struct{ id, frame string }{
		{"env-unknown-type", `{"type":"mystery_envelope","envelope_id":"env-unknown-type","payload":{}}`},
		{"env-unknown-event", `{"type":"events_api","envelope_id":"env-unknown-event","payload":{"type":"event_callback","event_id":"EvX","event":{"type":"no_such_event"}}}`},
		{"env-bad-payload", `{"type":"interactive","envelope_id":"env-bad-payload","payload":"not an object"}`},
		{"env-undecodable", `{"type":"events_api","envelope_id":"env-undecodable","payload":{"type":"event_callback","event":{"type":"app_mention","channel":"C1","ts":"1.2","user":"U1"}}}`},
	}
	for _, fr := range frames {
		f.sendRaw(fr.id, []byte(fr.frame))
		if a := f.nextAck(); a.EnvelopeID != fr.id {
			t.Fatalf("ack %q, want %q", a.EnvelopeID, fr.id)
		}
	}
	f.send("events_api", "env-good", mentionCallback("EvGood", "C1", "1700000000.000100", "", "<@UBOT> go"))
	f.nextAck()
	if ev := rec.next(t); ev.ID != "EvGood" {
		t.Fatalf("handled %q, want EvGood", ev.ID)
	}
	rec.none(t)
}

func TestSocketSlashCommand(t *testing.T) {
	f := newFakeSlack(t)
	rec := newRecorder()
	rec.result = func(ev bot.Event) bot.Result {
		if ev.Command == bot.CommandStart {
			return bot.Result{Notice: "Queued <yours>."}
		}
		return bot.Result{}
	}
	f.adapter(rec, Config{AllowedChannels: []string{"C1"}})
	f.conn()
	cmd := func(trigger, channel, text string) map[string]any {
		return map[string]any{"token": "x", "team_id": teamID, "channel_id": channel, "user_id": "U1", "user_name": "ann",
			"command": "/loopbot", "text": text, "trigger_id": trigger, "response_url": f.apiURL() + "response_url"}
	}

	f.send("slash_commands", "env-start", cmd("trig-s", "C1", "fix the <build> @here"))
	f.nextAck()
	root := f.nextCall("chat.postMessage")
	if got, want := root.Values.Get("text"), "<@U1> asked: fix the &lt;build&gt; @\u2060here"; got != want {
		t.Errorf("root message %q, want %q", got, want)
	}
	if root.Values.Get("thread_ts") != "" || root.Values.Get("channel") != "C1" {
		t.Errorf("root message posted to %v", root.Values)
	}
	ev := rec.next(t)
	if ev.Kind != bot.EventCommand || ev.Command != bot.CommandStart || ev.ID != "command:trig-s" ||
		ev.Text != "fix the <build> @here" || ev.Thread.Channel != "C1" || !strings.HasPrefix(ev.Thread.Thread, "1700000100.") {
		t.Errorf("start event %+v", ev)
	}
	// A slash command's notice goes through its response_url, ephemeral.
	if c := f.nextCall("response_url"); !strings.Contains(c.Values.Get("body"), `"text":"Queued \u0026lt;yours\u0026gt;."`) ||
		!strings.Contains(c.Values.Get("body"), `"response_type":"ephemeral"`) {
		t.Errorf("response_url body %s", c.Values.Get("body"))
	}

	// The playbook list is the asker's alone: no root message, the channel for the thread.
	before := len(f.Calls())
	f.send("slash_commands", "env-playbooks", cmd("trig-p", "C1", "playbooks"))
	f.nextAck()
	if ev := rec.next(t); ev.Command != bot.CommandStart || ev.Text != "playbooks" || ev.Thread.Thread != "C1" {
		t.Errorf("playbooks event %+v, want the channel as its thread", ev)
	}
	f.nextCall("response_url")
	for _, c := range f.Calls()[before:] {
		if c.Method == "chat.postMessage" {
			t.Errorf("/loopbot playbooks posted %v", c.Values)
		}
	}

	// From a member of another organisation in a Slack Connect channel: the command's
	// team_id is theirs, the thread is still named by the app's team.
	status := cmd("trig-t", "C1", "status https://acme.slack.com/archives/C1/p1700000000000100")
	status["team_id"] = "T0EXTERNAL"
	f.send("slash_commands", "env-status", status)
	f.nextAck()
	if ev := rec.next(t); ev.Command != bot.CommandStatus || ev.Thread.Thread != "1700000000.000100" || ev.Thread.Workspace != teamID {
		t.Errorf("status event %+v, want thread 1700000000.000100 in workspace %s", ev, teamID)
	}

	// Answered in the ack itself: no thread given, and a channel loopbot does not serve.
	for _, tc := range []struct{ channel, text, want string }{
		{"C1", "cancel", "does not tell apps which thread"},
		// A private channel's thread, asked about from another channel: not shown.
		{"C1", "status https://acme.slack.com/archives/G7/p1700000000000100", "in another channel"},
		{"C9", "do things", notAllowedText},
	} {
		f.send("slash_commands", "env-"+tc.channel, cmd("trig-"+tc.channel, tc.channel, tc.text))
		a := f.nextAck()
		var body struct{ Text, ResponseType string }
		if err := json.Unmarshal(a.Payload, &body); err != nil || !strings.Contains(body.Text, tc.want) {
			t.Errorf("ack payload %s, want ephemeral text with %q", a.Payload, tc.want)
		}
	}
	// A command by another name (an app's second command, or one routed here by mistake)
	// starts nothing: it is answered in the ack, ephemeral.
	other := cmd("trig-other", "C1", "fix the build")
	other["command"] = "/deploy"
	f.send("slash_commands", "env-other", other)
	a := f.nextAck()
	var body struct {
		Text         string `json:"text"`
		ResponseType string `json:"response_type"`
	}
	if err := json.Unmarshal(a.Payload, &body); err != nil || body.ResponseType != "ephemeral" || !strings.Contains(body.Text, "not loopbot's") || !strings.Contains(body.Text, "/loopbot") {
		t.Errorf("ack payload %s for /deploy, want the ephemeral other-command reply", a.Payload)
	}
	rec.none(t)
}
