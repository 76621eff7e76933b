package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
)

// TestTextHook checks what the loop passes to Hooks.Text over a run with a streaming model:
// the narration of a step that calls a tool, then a reset (it was not the answer), then the
// answer's text, with no reset after it.
func TestTextHook(t *testing.T) {
	llm := newLLMWith(t, llm.Config{MaxRetries: -1, Stream: true},
		step{text: "Let me read the notes.", calls: []agent.ToolCall{call("read", `{"q":"notes.txt"}`)}},
		calls(call("read", `{"q":"more.txt"}`)),
		text("The notes say hello."),
	)
	read := &fakeTool{name: "read", readOnly: true}
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{read}), "what do the notes say?")
	var got []string
	h := r.hooks()
	h.Text = func(_ context.Context, d agent.TextDelta) {
		if d.Reset {
			got = append(got, "<reset>")
			return
		}
		if n := len(got); n > 0 && got[n-1] != "<reset>" {
			got[n-1] += d.Text
			return
		}
		got = append(got, d.Text)
	}
	if err := r.ag.Run(context.Background(), r.st, h); err != nil {
		t.Fatal(err)
	}
	r.wantStatus(agent.StatusCompleted)
	want := "Let me read the notes.|<reset>|The notes say hello."
	if s := strings.Join(got, "|"); s != want {
		t.Errorf("text hook saw %q, want %q", s, want)
	}
}
