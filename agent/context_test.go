package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// planNote starts the message that carries the plan at the end of a prompt.
const planNote = "Your plan so far"

// TestPromptsShareAPrefix runs a long tool-heavy task and checks what a provider's prompt
// cache needs (cacheable): the tool specs and the system message are the same in every
// request, even when the plan changes; each request repeats the one before it message for
// message up to where the plan was, except at the few steps where a block of older outputs
// is cut; and an output, once shortened, is the same bytes in every later request.
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
		// 2 KB outputs: four times KeepRecent steps fit the default budget, so outputs are
		// cut twelve at a time, when sixteen steps are in full.
		{name: "default budget", outputKB: 2, maxRewrites: steps / (3 * keep)},
		// 8 KB outputs, capped at 1500 bytes, reach a 12000-token budget within about a
		// dozen steps: the cuts come sooner but still in blocks.
		{name: "tight budget", budget: 12000, outputKB: 8, maxRewrites: steps / 8},
		// At 5000 tokens the shortened 2 KB outputs alone come to half the budget after
		// about fifteen steps: the oldest of them then give way to the digest, in a block.
		{name: "digest", budget: 5000, outputKB: 2, maxRewrites: (steps + 3) / 3, digest: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs := longRunRequests(t, steps, keep, tt.budget, tt.outputKB)
			budget := orDefault(tt.budget, 32000)
			digests := 0
			for i, req := range reqs {
				if n := agent.EstimateTokens(req.Messages); n > budget {
					t.Errorf("request %d has about %d tokens, over the %d budget", i, n, budget)
				}
				if slices.ContainsFunc(req.Messages, func(m agent.Message) bool { return strings.HasPrefix(m.Content, "Earlier steps, shortened") }) {
					digests++
				}
			}
			rewrites, problems := cacheable(reqs)
			for _, p := range problems {
				t.Error(p)
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

// TestCacheableCatches checks that cacheable sees what would spoil a prompt cache, on the
// requests of a good run changed the ways a context manager could get it wrong.
func TestCacheableCatches(t *testing.T) {
	good := longRunRequests(t, 30, 4, 12000, 8)
	if _, problems := cacheable(good); len(problems) > 0 {
		t.Fatalf("the good run: %v", problems)
	}
	tests := []struct {
		name   string
		change func(i int, req *agent.Request)
		want   string
	}{
		{"a counter in the system prompt", func(i int, req *agent.Request) {
			req.Messages[0].Content += fmt.Sprintf("\nThis is step %d.", i)
		}, "another system message"},
		{"tool specs in another order", func(i int, req *agent.Request) {
			if i%2 == 1 {
				slices.Reverse(req.Tools)
			}
		}, "other tool specs"},
		{"a shortened output rewritten", func(i int, req *agent.Request) {
			for j, m := range req.Messages {
				if m.Role == agent.RoleTool && strings.Contains(m.Content, "older result shortened") {
					req.Messages[j].Content += fmt.Sprintf(" (%d requests ago)", i)
				}
			}
		}, "changed again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reqs []agent.Request
			for i, req := range good {
				req.Messages = slices.Clone(req.Messages)
				req.Tools = slices.Clone(req.Tools)
				tt.change(i, &req)
				reqs = append(reqs, req)
			}
			_, problems := cacheable(reqs)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("problems %v, want one saying %q", problems, tt.want)
			}
		})
	}
}

// longRunRequests runs a task of steps fetches of outputKB each, with two plan updates, and
// returns the requests the model received.
func longRunRequests(t *testing.T, steps, keep, budget, outputKB int) []agent.Request {
	t.Helper()
	out := strings.Repeat("0123456789abcdef\n", outputKB*1024/17+1)[:outputKB*1024]
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
	cfg := agent.Config{ContextTokens: budget, KeepRecent: keep, MaxSteps: steps + 10, StuckThreshold: 100, NoProgressSteps: -1}
	r := newRun(t, newAgent(t, llm.model, cfg, []agent.Tool{fetch}), "fetch every page")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	return llm.requests()
}

// cacheable checks a run's requests for what a provider's prompt cache needs, and counts the
// requests that do not repeat the one before them (the block cuts). The tool specs and the
// system message must be those of the first request; each tool result must keep the bytes it
// was first sent with until it is shortened, keep its shortened bytes from then on, and never
// come back once it gave way to the digest.
func cacheable(reqs []agent.Request) (rewrites int, problems []string) {
	type seen struct {
		forms []string // the contents it was sent with, in order
		gone  bool
	}
	results := map[string]*seen{}
	for i, req := range reqs {
		if !slices.EqualFunc(req.Tools, reqs[0].Tools, func(a, b agent.ToolSpec) bool {
			return a.Name == b.Name && a.Description == b.Description && string(a.Parameters) == string(b.Parameters)
		}) {
			problems = append(problems, fmt.Sprintf("request %d offers other tool specs than the first", i))
		}
		if sys := req.Messages[0]; sys.Role != agent.RoleSystem || sys.Content != reqs[0].Messages[0].Content {
			problems = append(problems, fmt.Sprintf("request %d has another system message than the first", i))
		}
		here := map[string]bool{}
		for _, m := range req.Messages {
			if m.Role != agent.RoleTool {
				continue
			}
			here[m.ToolCallID] = true
			s := results[m.ToolCallID]
			switch {
			case s == nil:
				results[m.ToolCallID] = &seen{forms: []string{m.Content}}
			case s.gone:
				problems = append(problems, fmt.Sprintf("request %d shows the result of %s again after it gave way to the digest", i, m.ToolCallID))
			case m.Content == s.forms[len(s.forms)-1]:
			case len(s.forms) == 1:
				s.forms = append(s.forms, m.Content)
			default:
				problems = append(problems, fmt.Sprintf("request %d: the result of %s changed again after it was shortened", i, m.ToolCallID))
			}
		}
		for id, s := range results {
			if !here[id] {
				s.gone = true
			}
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
	return rewrites, problems
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
