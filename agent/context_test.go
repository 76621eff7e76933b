package agent_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// planNote starts the message that carries the plan at the end of a prompt.
const planNote = "Your plan so far"

// TestPromptsShareAPrefix runs a long tool-heavy task and checks what a provider's prompt
// cache needs: the system message is the same in every request, even when the plan changes,
// and each request repeats the one before it message for message up to where the plan was,
// except at the few steps where a block of older outputs is cut.
func TestPromptsShareAPrefix(t *testing.T) {
	const steps, keep = 30, 4
	tests := []struct {
		name     string
		budget   int
		outputKB int
		// maxRewrites bounds the requests that do not repeat the one before them.
		maxRewrites int
		// digest says whether the oldest steps must have given way to the digest.
		digest bool
	}{
		// 2 KB outputs: twice KeepRecent steps fit the default budget, so outputs are cut
		// KeepRecent at a time, when eight steps are in full: one request in four.
		{name: "default budget", outputKB: 2, maxRewrites: (steps + 2) / keep},
		// 8 KB outputs reach a 12000-token budget within a few steps: the cuts come sooner
		// but still in blocks, at most one request in three.
		{name: "tight budget", budget: 12000, outputKB: 8, maxRewrites: (steps + 3) / 3},
		// At 5000 tokens the shortened 2 KB outputs alone come to half the budget after
		// about fifteen steps: the oldest of them then give way to the digest, in a block.
		{name: "digest", budget: 5000, outputKB: 2, maxRewrites: (steps + 3) / 3, digest: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := strings.Repeat("0123456789abcdef\n", tt.outputKB*1024/17+1)[:tt.outputKB*1024]
			fetch := &fakeTool{name: "fetch", readOnly: true, idempotent: true, fn: func(context.Context, json.RawMessage) (string, error) { return out, nil }}
			var script []step
			for i := range steps {
				script = append(script, calls(call("fetch", `{"q":"page-`+strconv.Itoa(i)+`"}`)))
				// The plan changes twice during the run.
				if i == 2 || i == 17 {
					script = append(script, calls(call("update_plan", `{"plan":[{"step":"fetch the pages","status":"in_progress"},{"step":"after page `+strconv.Itoa(i)+`","status":"pending"}]}`)))
				}
			}
			script = append(script, text("all fetched"))
			llm := newLLM(t, script...)
			cfg := agent.Config{ContextTokens: tt.budget, KeepRecent: keep, MaxSteps: steps + 10, StuckThreshold: 100, NoProgressSteps: -1}
			r := newRun(t, newAgent(t, llm.model, cfg, []agent.Tool{fetch}), "fetch every page")
			r.advance()
			r.wantStatus(agent.StatusCompleted)

			reqs := llm.requests()
			budget := orDefault(tt.budget, 32000)
			rewrites, digests := 0, 0
			var sysChanged []int
			for i, req := range reqs {
				if n := agent.EstimateTokens(req.Messages); n > budget {
					t.Errorf("request %d has about %d tokens, over the %d budget", i, n, budget)
				}
				if sys := req.Messages[0]; sys.Role != agent.RoleSystem || sys.Content != reqs[0].Messages[0].Content {
					sysChanged = append(sysChanged, i)
				}
				if slices.ContainsFunc(req.Messages, func(m agent.Message) bool { return strings.HasPrefix(m.Content, "Earlier steps, shortened") }) {
					digests++
				}
				if i == 0 {
					continue
				}
				prev := reqs[i-1].Messages
				if last := prev[len(prev)-1]; last.Role == agent.RoleUser && strings.HasPrefix(last.Content, planNote) {
					prev = prev[:len(prev)-1]
				}
				if len(req.Messages) < len(prev) || !slices.EqualFunc(prev, req.Messages[:len(prev)], sameMessage) {
					rewrites++
				}
			}
			if len(sysChanged) > 0 {
				t.Errorf("requests %v have another system message than the first", sysChanged)
			}
			if rewrites > tt.maxRewrites {
				t.Errorf("%d of %d requests rewrote what the one before sent, want at most %d", rewrites, len(reqs), tt.maxRewrites)
			}
			t.Logf("%d of %d requests rewrote what the one before sent, %d held the digest", rewrites, len(reqs), digests)
			if tt.digest != (digests > 0) {
				t.Errorf("%d requests held the digest of the oldest steps, want some: %v", digests, tt.digest)
			}

			// The plan still reaches the model, as the last message, in its latest version.
			last := reqs[len(reqs)-1].Messages
			if m := last[len(last)-1]; m.Role != agent.RoleUser || !strings.HasPrefix(m.Content, planNote) || !strings.Contains(m.Content, "after page 17") {
				t.Errorf("last message of the last request is a %s message %.80q, want the latest plan", m.Role, m.Content)
			}
		})
	}
}

// orDefault returns v, or def when v is zero.
func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// sameMessage reports whether two messages would be sent as the same bytes.
func sameMessage(a, b agent.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && a.Name == b.Name &&
		slices.Equal(a.ToolCalls, b.ToolCalls)
}
