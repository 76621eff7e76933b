package slack

import (
	"encoding/json"
	"testing"

	"github.com/loopbot/loopbot/agent/llm/llmtest"

	"github.com/loopbot/loopbot/bot"
)

// replyCallback is the Events API payload of a plain reply by user in channel C1's thread
// threadTS, as Slack sends message.channels.
func replyCallback(eventID, user, ts, threadTS, text string) map[string]any {
	return map[string]any{"token": "x", "team_id": teamID, "api_app_id": "A1", "type": "event_callback",
		"event_id": eventID, "event_time": 1700000200, "event": map[string]any{
			"type": "message", "channel_type": "channel", "user": user, "text": text,
			"ts": ts, "thread_ts": threadTS, "channel": "C1", "event_ts": ts}}
}

// TestE2EStrangerThreadReply: a reply in a thread the bot never started nor was mentioned
// in (people talking among themselves in a channel the bot is in) starts nothing and gets
// no answer, not even a notice.
func TestE2EStrangerThreadReply(t *testing.T) {
	e := newE2E(t, bot.Config{})
	e.f.send("events_api", "env-1", replyCallback("Ev1", "U2", "1700000300.000200", "1700000300.000100", "anyone seen the deploy logs?"))
	if a := e.f.nextAck(); a.EnvelopeID != "env-1" {
		t.Fatalf("ack for %q", a.EnvelopeID)
	}
	if h := e.handled(); h.ev.Kind != bot.EventReply || h.res != (bot.Result{}) {
		t.Fatalf("stranger's reply handled as %s with %+v, want a reply that does nothing", h.ev.Kind, h.res)
	}
	e.stop()
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("%d model requests after a stranger's reply, want 0", n)
	}
	for _, c := range e.f.Calls() {
		if c.Method != "auth.test" && c.Method != "apps.connections.open" {
			t.Errorf("call %s after a stranger's reply, want none", c.Method)
		}
	}
}

// TestE2EEditedMention: Slack sends an edited mention again as a new app_mention with a new
// event_id (the captured payload in testdata/events/app_mention_edited.json); the edit
// starts no second run.
func TestE2EEditedMention(t *testing.T) {
	e := newE2E(t, bot.Config{}, llmtest.Text("Deployed to staging."))
	edited := fixture(t, "events/app_mention_edited.json")
	var original map[string]any
	if err := json.Unmarshal(edited, &original); err != nil {
		t.Fatal(err)
	}
	inner := original["event"].(map[string]any)
	delete(inner, "edited")
	inner["text"] = "<@" + botUserID + "> deploy staging"
	original["event_id"] = "EvOriginal"
	e.f.send("events_api", "env-1", original)
	e.f.nextAck()
	if h := e.handled(); h.ev.Kind != bot.EventMention || h.res.RunID == "" {
		t.Fatalf("original mention handled as %s with %+v, want a run", h.ev.Kind, h.res)
	}
	e.log.waitCall(t, "the answer", 1, "chat.postMessage", and(answer, blocksHave("Deployed to staging.")))

	e.f.send("events_api", "env-2", json.RawMessage(edited))
	if a := e.f.nextAck(); a.EnvelopeID != "env-2" {
		t.Fatalf("ack for %q, want env-2", a.EnvelopeID)
	}
	// The edit reaches nothing: send a stranger's reply after it and see that it is the
	// next delivery the bot handles.
	e.f.send("events_api", "env-3", replyCallback("EvLater", "U2", "1706785500.000100", "1706785400.000100", "unrelated"))
	e.f.nextAck()
	if h := e.handled(); h.ev.ID != "EvLater" {
		t.Fatalf("the bot handled %s (%s) after the edit, want the edit dropped", h.ev.ID, h.ev.Kind)
	}
	var runs []*bot.RunRecord
	e.view(func(tx bot.Tx) (err error) { runs, err = tx.Runs(bot.RunFilter{}); return err })
	if len(runs) != 1 {
		t.Errorf("%d runs stored, want 1: the edit started a run", len(runs))
	}
	e.stop()
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
}

// TestE2ESlackConnectReply: in a Slack Connect channel, an event's team_id is the team of
// the organisation whose member acted, not the app's (slackapi/java-slack-sdk#629,
// slackapi/bolt-js#687: "the fields is supposed to be the ones for source workspace ... We
// should respect authorizations[0].team_id over team_id"). A reply from an external member
// still continues the thread an internal member started: the thread is named by the app's
// own team.
func TestE2ESlackConnectReply(t *testing.T) {
	e := newE2E(t, bot.Config{}, llmtest.Text("The build is green."), llmtest.Text("All 412 tests pass."))
	e.mention("env-1", "Ev1", "is the build green?")
	e.handled()
	e.log.waitCall(t, "the first answer", 1, "chat.postMessage", and(answer, blocksHave("The build is green.")))

	reply := replyCallback("Ev2", "U0EXT", "1700000200.000100", rootTS, "and the tests?")
	reply["team_id"] = "T0EXTERNAL"
	reply["event"].(map[string]any)["team"] = "T0EXTERNAL"
	reply["is_ext_shared_channel"] = true
	e.f.send("events_api", "env-2", reply)
	e.f.nextAck()
	h := e.handled()
	if h.ev.Thread.Workspace != teamID || h.res.RunID == "" {
		t.Fatalf("external member's reply handled in %+v with %+v, want a follow-up run in the app's team %s", h.ev.Thread, h.res, teamID)
	}
	e.log.waitCall(t, "the second answer", 1, "chat.postMessage", and(answer, blocksHave("All 412 tests pass.")))
}
