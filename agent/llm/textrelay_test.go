package llm_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// textLog records what a client passes to OnText.
type textLog struct{ deltas []agent.TextDelta }

func (l *textLog) add(d agent.TextDelta) { l.deltas = append(l.deltas, d) }

// text is what was streamed since the last reset, and how many resets came.
func (l *textLog) text() (string, int) {
	var b strings.Builder
	resets := 0
	for _, d := range l.deltas {
		if d.Reset {
			b.Reset()
			resets++
			continue
		}
		b.WriteString(d.Text)
	}
	return b.String(), resets
}

// TestStreamedText checks what a streaming client passes on as the reply is written: the
// content in pieces, never a tool call's arguments or a provider's reasoning, and a reset
// before an attempt that repeats a broken one.
func TestStreamedText(t *testing.T) {
	long := strings.Repeat("The answer grows word by word. ", 20)
	tests := []struct {
		name   string
		script []llmtest.Step
		stream bool
		want   string
		resets int
		// pieces is the least number of deltas expected.
		pieces int
	}{
		{name: "text in pieces", stream: true, script: []llmtest.Step{llmtest.Text(long)}, want: long, pieces: 2},
		{name: "narration before a call, not its arguments", stream: true,
			script: []llmtest.Step{llmtest.Reply("Let me look.", llmtest.Call("list_files", `{"path":"secret-dir"}`))},
			want:   "Let me look.", pieces: 1},
		{name: "reasoning is not text", stream: true,
			script: []llmtest.Step{llmtest.Recording(loadFixture(t, "openrouter_stream_reasoning.sse"))},
			want:   "2 + 2 = 4", pieces: 1},
		{name: "a broken stream is retried after a reset", stream: true,
			script: []llmtest.Step{llmtest.Truncate(llmtest.Text(long)), llmtest.Text("Second try.")},
			want:   "Second try.", resets: 1, pieces: 2},
		{name: "no stream, no text", stream: false, script: []llmtest.Step{llmtest.Text("Whole.")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewTest(t, tt.script...)
			c, _ := newClient(t, srv, llm.Config{Stream: tt.stream})
			var log textLog
			req := userGoal
			req.OnText = log.add
			if _, err := c.Complete(context.Background(), req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			got, resets := log.text()
			if got != tt.want || resets != tt.resets {
				t.Errorf("streamed %q with %d resets, want %q with %d", got, resets, tt.want, tt.resets)
			}
			if len(log.deltas) < tt.pieces {
				t.Errorf("%d deltas, want at least %d", len(log.deltas), tt.pieces)
			}
			for _, d := range log.deltas {
				if strings.Contains(d.Text, "secret-dir") || strings.Contains(d.Text, "arithmetic") {
					t.Errorf("delta %q carries a tool call's arguments or reasoning", d.Text)
				}
			}
		})
	}
}
