package agent_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// step is one scripted model reply.
type step struct {
	text       string
	calls      []agent.ToolCall
	status     int // an HTTP error status instead of a reply
	retryAfter time.Duration
	usage      agent.Usage
}

func text(s string) step                   { return step{text: s} }
func calls(cs ...agent.ToolCall) step      { return step{calls: cs} }
func failure(status int) step              { return step{status: status} }
func withUsage(s step, u agent.Usage) step { s.usage = u; return s }

// scriptedLLM plays a script of replies and records what it was asked.
type scriptedLLM struct {
	t     *testing.T
	model agent.Model
	// final answers the calls made without tools once the script is used up.
	final string
	// fallback answers once the script is used up; n counts those calls from 0.
	fallback func(n int) step
	// route, when set, answers every request from what it asks (for concurrent callers).
	route func(req agent.Request) step

	mu     sync.Mutex
	script []step
	extra  int
	reqs   []agent.Request
	sleeps []time.Duration
}

func newLLM(t *testing.T, script ...step) *scriptedLLM {
	return newLLMWith(t, llm.Config{MaxRetries: -1}, script...)
}

// newLLMWith serves the script from an llmtest server and consults it through the real
// go-openai client of package llm, so every test of the loop goes over the wire. Prices of
// one dollar per million tokens make costs follow tokens.
func newLLMWith(t *testing.T, cfg llm.Config, script ...step) *scriptedLLM {
	t.Helper()
	l := &scriptedLLM{t: t, script: script}
	srv := llmtest.NewTest(t)
	srv.SetFallback(llmtest.Func(l.serve))
	cfg.BaseURL, cfg.Model = srv.URL(), "test-model"
	cfg.Price = llm.Price{PromptPerMillion: 1, CompletionPerMillion: 1}
	client, err := llm.New(cfg, llm.WithSleep(func(ctx context.Context, d time.Duration) error {
		l.mu.Lock()
		l.sleeps = append(l.sleeps, d)
		l.mu.Unlock()
		return ctx.Err()
	}))
	if err != nil {
		t.Fatal(err)
	}
	l.model = client
	return l
}

func (l *scriptedLLM) next(req agent.Request) step {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, req)
	if l.route != nil {
		return l.route(req)
	}
	if len(req.Tools) == 0 && l.final != "" {
		return text(l.final)
	}
	if len(l.script) > 0 {
		s := l.script[0]
		l.script = l.script[1:]
		return s
	}
	if l.fallback != nil {
		n := l.extra
		l.extra++
		return l.fallback(n)
	}
	return failure(500)
}

// serve answers one request the server received with the next step of the script.
func (l *scriptedLLM) serve(r llmtest.Request) llmtest.Step {
	req := agent.Request{JSON: r.ResponseFormat == "json_object"}
	for _, m := range r.Messages {
		msg := agent.Message{Role: agent.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, agent.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, tool := range r.Tools {
		req.Tools = append(req.Tools, agent.ToolSpec{Name: tool.Name, Description: tool.Description, Parameters: tool.Parameters})
	}
	s := l.next(req)
	var out llmtest.Step
	switch {
	case s.status != 0:
		return llmtest.Status(s.status, s.retryAfter)
	case len(s.calls) > 0:
		var calls []llmtest.ToolCall
		for i, c := range s.calls {
			calls = append(calls, llmtest.ToolCall{ID: fmt.Sprintf("call_%d_%d", len(l.requests()), i), Name: c.Name, Arguments: c.Arguments})
		}
		out = llmtest.Reply(s.text, calls...)
	default:
		out = llmtest.Text(s.text)
	}
	if s.usage != (agent.Usage{}) {
		out = out.WithUsage(llmtest.Usage{PromptTokens: s.usage.PromptTokens, CompletionTokens: s.usage.CompletionTokens})
	}
	return out
}

func (l *scriptedLLM) requests() []agent.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]agent.Request(nil), l.reqs...)
}

// sawToolResult reports whether request i carried a tool result containing s.
func (l *scriptedLLM) sawToolResult(i int, s string) bool {
	return l.sawMessage(i, agent.RoleTool, s)
}

// sawUserText reports whether request i carried a user message containing s.
func (l *scriptedLLM) sawUserText(i int, s string) bool {
	return l.sawMessage(i, agent.RoleUser, s)
}

func (l *scriptedLLM) sawMessage(i int, role agent.Role, s string) bool {
	reqs := l.requests()
	if i >= len(reqs) {
		l.t.Errorf("request %d was never made (%d made)", i, len(reqs))
		return false
	}
	for _, m := range reqs[i].Messages {
		if m.Role == role && strings.Contains(m.Content, s) {
			return true
		}
	}
	return false
}

func (l *scriptedLLM) toolNames(i int) []string {
	var names []string
	for _, t := range l.requests()[i].Tools {
		names = append(names, t.Name)
	}
	return names
}

func llmConfig(retries int) llm.Config { return llm.Config{MaxRetries: retries} }
