package agent_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// step is one scripted model reply.
type step struct {
	text   string
	calls  []agent.ToolCall
	status int // an HTTP error status instead of a reply
	usage  agent.Usage
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

	mu     sync.Mutex
	script []step
	extra  int
	reqs   []agent.Request
}

func newLLM(t *testing.T, script ...step) *scriptedLLM {
	l := &scriptedLLM{t: t, script: script}
	l.model = modelFunc(l.complete)
	return l
}

type modelFunc func(ctx context.Context, req agent.Request) (agent.Reply, error)

func (f modelFunc) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	return f(ctx, req)
}

func (l *scriptedLLM) next(req agent.Request) step {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, req)
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

func (l *scriptedLLM) complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	s := l.next(req)
	if s.status != 0 {
		return agent.Reply{}, fmt.Errorf("status %d", s.status)
	}
	msg := agent.Message{Role: agent.RoleAssistant, Content: s.text}
	for i, c := range s.calls {
		c.ID = fmt.Sprintf("call_%d_%d", len(l.reqs), i)
		msg.ToolCalls = append(msg.ToolCalls, c)
	}
	return agent.Reply{Message: msg, Usage: s.usage}, nil
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
