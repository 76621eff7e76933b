package bot_test

import (
	"slices"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// TestThreadWithRealModelClient runs a thread end to end over HTTP: the real model client
// against the scripted OpenAI-compatible server. It runs in real time (a bubble cannot hold
// network connections), so it waits for what the platform records, never for a duration.
func TestThreadWithRealModelClient(t *testing.T) {
	srv := llmtest.NewTest(t,
		llmtest.ToolCalls(llmtest.Call("look", `{"q":"capital of France"}`)),
		llmtest.Text("The capital of France is Paris."),
		llmtest.Text("Paris has about two million people."),
	)
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "test-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	look := &tool{name: "look", risk: agent.RiskSafe, out: "Paris"}
	h := newHarnessWith(t, bot.Config{EditInterval: agent.Duration(time.Millisecond)}, client, look)

	first := h.mention(ann, "What is the capital of France?")
	h.plat.await(t, "the first answer and its finished card", func() bool {
		cards := h.plat.sent(bot.KindStatus)
		return len(h.plat.sent(bot.KindAnswer)) == 1 && len(cards) > 0 && h.plat.shown(cards[0].ref.ID).Text == "Done"
	})
	cards := h.plat.sent(bot.KindStatus)
	if cards[0].kind != "post" || len(cards) < 2 || slices.ContainsFunc(cards[1:], func(o op) bool { return o.kind != "update" || o.ref != cards[0].ref }) {
		t.Errorf("status card calls = %+v, want one post and then edits of it", cards)
	}
	h.wantStatus(first.RunID, agent.StatusCompleted)

	h.event(bot.Event{Kind: bot.EventReply, User: bob, Text: "How many people live there?"})
	h.plat.await(t, "the follow-up's answer", func() bool { return len(h.plat.sent(bot.KindAnswer)) == 2 })
	if got := h.plat.sent(bot.KindAnswer)[1].msg.Text; got != "Paris has about two million people." {
		t.Errorf("follow-up answer = %q", got)
	}

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("server got %d requests, want 3", len(reqs))
	}
	var sawGoal, sawAnswer bool
	for _, m := range reqs[2].Messages {
		sawGoal = sawGoal || m.Role == "user" && m.Content == "What is the capital of France?"
		sawAnswer = sawAnswer || m.Role == "assistant" && m.Content == "The capital of France is Paris."
	}
	if !sawGoal || !sawAnswer || reqs[2].LastMessage().Content != "How many people live there?" {
		t.Errorf("follow-up request messages = %+v, want the earlier goal and answer before the new question", reqs[2].Messages)
	}
	if look.calls.Load() != 1 {
		t.Errorf("tool ran %d times, want 1", look.calls.Load())
	}
}
