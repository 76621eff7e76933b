package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// TestE2EAssistantSuggestedPrompts: a new assistant thread (the captured event in
// testdata/events/assistant_thread_started.json) gets the suggested prompts, and never
// reaches the bot; without the assistant features it gets nothing.
func TestE2EAssistantSuggestedPrompts(t *testing.T) {
	started := json.RawMessage(fixture(t, "events/assistant_thread_started.json"))
	e := newE2E(t, bot.Config{}, llmtest.Text("Hi."))
	e.f.send("events_api", "env-0", started)
	e.f.nextAck()
	// Nor does a run show as a thread status.
	e.mention("env-m", "EvM", "say hi")
	e.handled()
	e.log.waitCall(t, "the answer", 1, "chat.postMessage", and(answer, blocksHave("Hi.")))
	if n := len(e.log.of("assistant.threads.setStatus", nil)); n != 0 {
		t.Errorf("%d setStatus calls without the assistant features", n)
	}
	// Nor a thread in a channel the adapter does not listen to.
	e.stop()
	e.assistant, e.slackCfg = true, Config{AllowedChannels: []string{"C1"}}
	e.start()
	e.f.send("events_api", "env-00", started)
	e.f.nextAck()

	e.stop()
	e.slackCfg = Config{SuggestedPrompts: []string{"Summarise the open issues", "What changed in the last release?"}}
	e.start()
	e.f.send("events_api", "env-1", started)
	e.f.nextAck()
	c := e.log.waitCall(t, "the suggested prompts", 1, "assistant.threads.setSuggestedPrompts", nil)
	if c.Values.Get("channel_id") != "D123ABC456" || c.Values.Get("thread_ts") != "1729999327.187299" {
		t.Errorf("prompts set in %s/%s", c.Values.Get("channel_id"), c.Values.Get("thread_ts"))
	}
	var prompts []struct{ Title, Message string }
	if err := json.Unmarshal([]byte(c.Values.Get("prompts")), &prompts); err != nil {
		t.Fatal(err)
	}
	if len(prompts) != 2 || prompts[0].Message != "Summarise the open issues" || prompts[1].Title != "What changed in the last release?" {
		t.Errorf("prompts = %+v", prompts)
	}
	if n := len(e.log.of("assistant.threads.setSuggestedPrompts", nil)); n != 1 {
		t.Errorf("%d setSuggestedPrompts calls, want 1 (none without the assistant features)", n)
	}
	select {
	case h := <-e.done:
		t.Errorf("the bot handled %+v", h.ev)
	default:
	}
}

// TestE2EAssistantStatus: with the assistant features, a working run shows as the thread's
// status, which is cleared while the run waits for approval and set again when it goes on;
// a failing setStatus changes nothing else. The answer carries Slack's feedback buttons, and
// a click on one is stored as the person's rating.
func TestE2EAssistantStatus(t *testing.T) {
	e := agentE2E(t, false)
	// The model holds its first reply until the test has seen the run working.
	open := e.gate(llmtest.ToolCalls(llmtest.Call("deploy", `{"version":"1.2"}`)))
	openAnswer := e.gate(llmtest.Text("Deployed v1.2."))
	// The first setStatus fails: the run goes on regardless.
	e.f.FailNext("assistant.threads.setStatus", 1, slackfake.Failure{Body: `{"ok":false,"error":"missing_scope"}`})
	e.mention("env-1", "Ev1", "deploy v1.2")
	runID := e.handled().res.RunID
	inThread := func(c call) bool { return c.Values.Get("channel_id") == "C1" && c.Values.Get("thread_ts") == rootTS }
	status := func(s string) func(call) bool {
		return func(c call) bool { return inThread(c) && c.Values.Get("status") == s }
	}
	e.log.waitCall(t, "the status saying the run works", 1, "assistant.threads.setStatus", status(workingStatus))
	open()
	post := e.log.waitCall(t, "the approval card", 1, "chat.postMessage", approvalCard)
	ap := e.approval(runID)
	e.log.waitCall(t, "the status cleared while the run waits", 1, "assistant.threads.setStatus", status(""))
	before := len(e.log.of("assistant.threads.setStatus", status(workingStatus)))

	e.click("env-click", "trig-1", "U1", "ann", ap.Card.ID, buttonValue(t, post, "Approve once"))
	e.handled()
	e.log.waitCall(t, "the status set again once the approved run goes on", before+1, "assistant.threads.setStatus", status(workingStatus))
	openAnswer()
	ans := e.log.waitCall(t, "the answer", 1, "chat.postMessage", and(answer, blocksHave("Deployed v1.2.")))
	// Set while the run works, cleared while it waits and when it ends, and never twice the
	// same in a row: a card edit that changes nothing the status shows, or another message's
	// edit (the approval card's), makes no call.
	e.log.waitCall(t, "the final card", 1, "chat.update", and(statusCard, blocksHave("Done")))
	var seq []string
	prev := ""
	for i, c := range e.log.of("assistant.threads.setStatus", nil) {
		shown := c.Values.Get("status") + " " + c.Values.Get("loading_messages")
		if i > 0 && shown == prev {
			t.Errorf("status set to %q twice in a row", shown)
		}
		prev = shown
		if len(seq) == 0 || seq[len(seq)-1] != c.Values.Get("status") {
			seq = append(seq, c.Values.Get("status"))
		}
	}
	if want := []string{workingStatus, "", workingStatus, ""}; strings.Join(seq, "|") != strings.Join(want, "|") {
		t.Errorf("statuses %q, want %q", seq, want)
	}
	for _, c := range e.log.of("assistant.threads.setStatus", nil) {
		if !inThread(c) {
			t.Errorf("status set in %s/%s", c.Values.Get("channel_id"), c.Values.Get("thread_ts"))
		}
	}

	// The answer's rating buttons are Slack's feedback buttons.
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Negative struct {
				Value string `json:"value"`
			} `json:"negative_button"`
		} `json:"elements"`
	}
	if err := json.Unmarshal([]byte(ans.Values.Get("blocks")), &blocks); err != nil {
		t.Fatal(err)
	}
	last := blocks[len(blocks)-1]
	if last.Type != "context_actions" || len(last.Elements) != 1 || last.Elements[0].Type != "feedback_buttons" {
		t.Fatalf("the answer's last block is %+v, want feedback buttons", last)
	}
	var click map[string]any
	if err := json.Unmarshal(fixture(t, "events/block_actions_feedback.json"), &click); err != nil {
		t.Fatal(err)
	}
	click["channel"] = map[string]any{"id": "C1"}
	click["container"] = map[string]any{"type": "message", "message_ts": ans.TS, "channel_id": "C1", "thread_ts": rootTS}
	click["message"] = map[string]any{"ts": ans.TS, "thread_ts": rootTS}
	click["actions"].([]any)[0].(map[string]any)["value"] = last.Elements[0].Negative.Value
	e.f.send("interactive", "env-rate", click)
	e.f.nextAck()
	if h := e.handled(); h.res.Notice != "Thanks: you rated this answer not helpful." {
		t.Errorf("rating: notice %q", h.res.Notice)
	}
	var rated []*bot.Feedback
	e.view(func(tx bot.Tx) (err error) { rated, err = tx.Feedback(runID); return err })
	if len(rated) != 1 || rated[0].Value != bot.FeedbackDown || rated[0].User.ID != "U1" {
		t.Errorf("stored ratings %+v", rated)
	}
	if !strings.Contains(e.log.waitCall(t, "the rating's notice", 1, "chat.postEphemeral", nil).Values.Get("text"), "not helpful") {
		t.Error("the rater was not told")
	}
}

// TestThreadStatusAfterPost: Slack clears an assistant thread's status when the app posts
// in it, so the next card edit of a working run sets it again, though it says the same.
func TestThreadStatusAfterPost(t *testing.T) {
	f := newFakeSlack(t)
	a := f.adapter(nil, Config{Assistant: true})
	f.conn()
	thread := bot.ThreadRef{Platform: platform, Workspace: teamID, Channel: "C1", Thread: rootTS}
	card := bot.Message{Kind: bot.KindStatus, Title: "deploy", Text: "Working: build, then test", Working: true, Activity: "build, then test"}
	ref, err := a.Post(t.Context(), thread, card)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { return a.Update(t.Context(), ref, card) },
		func() error {
			_, err := a.Post(t.Context(), thread, bot.Message{Kind: bot.KindNotice, Text: "note"})
			return err
		},
		func() error { return a.Update(t.Context(), ref, card) },
		// Another message's edit says nothing of the run: the status stays.
		func() error {
			return a.Update(t.Context(), bot.MessageRef{Thread: thread, ID: "1700000001.000100"}, bot.Message{Kind: bot.KindApproval, Title: "deploy: approved"})
		},
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	calls := f.CallsOf("assistant.threads.setStatus")
	if len(calls) != 2 {
		t.Fatalf("%d setStatus calls, want 2: once at the post, once after the notice", len(calls))
	}
	if got := calls[0].Values.Get("loading_messages"); got != "build  then test" {
		t.Errorf("loading message %q: the activity without its comma, which Slack splits at", got)
	}
}
