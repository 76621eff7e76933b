package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// newStreamingE2E is an e2e world whose app has the Agents & AI Apps features and whose
// model streams.
func newStreamingE2E(t *testing.T, script ...llmtest.Step) *e2e {
	t.Helper()
	return agentE2E(t, true, script...)
}

// agentE2E is an e2e world whose app has the Agents & AI Apps features, and whose model
// streams if stream is set.
func agentE2E(t *testing.T, stream bool, script ...llmtest.Step) *e2e {
	t.Helper()
	e := newE2E(t, bot.Config{}, script...)
	e.stop()
	e.assistant, e.stream = true, stream
	e.start()
	return e
}

const (
	planStart = `{"plan":[{"step":"look at the site","status":"in_progress"},{"step":"answer","status":"pending"}]}`
	planNext  = `{"plan":[{"step":"look at the site","status":"done"},{"step":"answer","status":"in_progress"}]}`
	// streamedAnswer holds mention markup, which must reach Slack inert.
	streamedAnswer = "The site is **up**, <!here> and all is well."
)

// TestE2EStreamedAnswer: with the agent features on, the answer is streamed into the thread
// (chat.startStream to the person who asked, appendStream, stopStream), the plan shows as
// task cards in the same message, narration before a tool call stays above the answer, and
// the answer is not posted a second time.
func TestE2EStreamedAnswer(t *testing.T) {
	e := newStreamingE2E(t,
		llmtest.Reply("Let me plan this. ", llmtest.Call("update_plan", planStart)),
		llmtest.ToolCalls(llmtest.Call("update_plan", planNext)),
		llmtest.Text(streamedAnswer),
	)
	e.mention("env-1", "Ev1", "is the site up?")
	e.handled()
	stop := e.log.waitCall(t, "the stream stopped", 1, "chat.stopStream", nil)

	start := e.log.of("chat.startStream", nil)
	if len(start) != 1 {
		t.Fatalf("%d chat.startStream calls, want 1", len(start))
	}
	v := start[0].Values
	if v.Get("channel") != "C1" || v.Get("thread_ts") != rootTS || v.Get("recipient_team_id") != teamID ||
		v.Get("recipient_user_id") != "U1" || v.Get("task_display_mode") != "plan" {
		t.Errorf("chat.startStream %v: want the thread, its asker as recipient, plan display", v)
	}
	if stop.Values.Get("ts") != start[0].TS {
		t.Errorf("stopped stream %s, started %s", stop.Values.Get("ts"), start[0].TS)
	}
	if n := len(e.log.of("chat.appendStream", nil)); n < 3 {
		t.Errorf("%d chat.appendStream calls, want the narration's break, the task updates and the answer", n)
	}
	streams := e.f.Streams()
	if len(streams) != 1 || !streams[0].Stopped {
		t.Fatalf("streams %+v, want one, stopped", streams)
	}
	want := "Let me plan this. \n\n" + strings.Replace(streamedAnswer, "<!here>", "<\u2060!here>", 1)
	if streams[0].Text != want {
		t.Errorf("streamed text %q, want %q", streams[0].Text, want)
	}
	var tasks []string
	for _, c := range streams[0].Chunks {
		var ch struct{ Type, ID, Title, Status string }
		if err := json.Unmarshal(c, &ch); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, ch.Type+" "+ch.ID+" "+ch.Status+" "+ch.Title)
	}
	wantTasks := []string{
		"task_update step-1 in_progress look at the site", "task_update step-2 pending answer",
		"task_update step-1 complete look at the site", "task_update step-2 in_progress answer",
	}
	if strings.Join(tasks, "|") != strings.Join(wantTasks, "|") {
		t.Errorf("task chunks\n%q\nwant\n%q", tasks, wantTasks)
	}
	if n := len(e.log.of("chat.postMessage", answer)); n != 0 {
		t.Errorf("the answer was also posted %d times with chat.postMessage", n)
	}
	if n := len(e.log.of("chat.postMessage", statusCard)); n != 1 {
		t.Errorf("%d status cards, want the usual one", n)
	}
}

// TestE2EStreamRefused: when Slack refuses to stream (an app without the feature), the answer
// is posted as today's Block Kit message, and the adapter does not try again for the next
// run.
func TestE2EStreamRefused(t *testing.T) {
	e := newStreamingE2E(t, llmtest.Text("First answer, in full."), llmtest.Text("Second answer, in full."))
	e.f.RefuseStreams("not_allowed")
	e.mention("env-1", "Ev1", "first question")
	e.handled()
	e.log.waitCall(t, "the first answer", 1, "chat.postMessage", and(answer, blocksHave("First answer")))

	e.f.send("events_api", "env-2", mentionCallback("Ev2", "C1", "1700000000.000200", "", "<@"+botUserID+"> second question"))
	e.f.nextAck()
	e.handled()
	e.log.waitCall(t, "the second answer", 1, "chat.postMessage", and(answer, blocksHave("Second answer")))
	if n := len(e.log.of("chat.startStream", nil)); n != 1 {
		t.Errorf("%d chat.startStream calls, want the one that was refused and no more", n)
	}
	if n := len(e.log.of("chat.postMessage", answer)); n != 2 {
		t.Errorf("%d answers posted, want 2", n)
	}
}

// TestE2EStreamAcrossApproval: a run that plans and narrates, then waits for an approval,
// stops its stream (the approval card comes as usual); once approved it shows its plan again
// and streams its answer in a new message, which becomes the answer.
func TestE2EStreamAcrossApproval(t *testing.T) {
	e := newStreamingE2E(t,
		llmtest.ToolCalls(llmtest.Call("update_plan", planStart)),
		llmtest.Reply("I will deploy v1.2 now. ", llmtest.Call("deploy", `{"version":"1.2"}`)),
		llmtest.Text("Deployed v1.2, all good."))
	e.mention("env-1", "Ev1", "deploy v1.2")
	e.handled()
	post := e.log.waitCall(t, "the approval card", 1, "chat.postMessage", approvalCard)
	e.log.waitCall(t, "the narration's stream stopped", 1, "chat.stopStream", nil)
	e.click("env-click", "trig-1", "U1", "ann", post.TS, buttonValue(t, post, "Approve once"))
	e.handled()
	e.log.waitCall(t, "the answer's stream stopped", 2, "chat.stopStream", nil)

	streams := e.f.Streams()
	if len(streams) != 2 || streams[0].Text != "I will deploy v1.2 now. \n\n" || streams[1].Text != "Deployed v1.2, all good." {
		t.Fatalf("streams %+v: want the narration, then the answer", streams)
	}
	if n := len(e.log.of("chat.postMessage", answer)); n != 0 {
		t.Errorf("the answer was also posted %d times", n)
	}
	for i, s := range streams {
		if len(s.Chunks) != 2 || !strings.Contains(string(s.Chunks[0]), "look at the site") {
			t.Errorf("stream %d has chunks %s, want the plan's two task cards", i+1, s.Chunks)
		}
	}
	if n := e.tool.count(); n != 1 {
		t.Errorf("deploy ran %d times", n)
	}
}
