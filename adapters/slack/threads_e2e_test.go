package slack

import (
	"testing"

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
