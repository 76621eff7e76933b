package agent

import (
	"context"
	"sync"
)

// A tool that consults a model on the run's behalf (an MCP server sampling through loopbot)
// spends the run's budget like the loop's own model calls. It says so with ReportUsage on the
// context of its call, and the loop adds what it reports to the run's usage when the call
// returns, so the token and cost budgets see it.

type usageKey struct{}

// usageSink collects what one call reports.
type usageSink struct {
	mu    sync.Mutex
	usage Usage
}

func (s *usageSink) add(u Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usage = s.usage.Add(u)
}

func (s *usageSink) total() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage
}

// ReportUsage adds u to the usage of the run whose tool call ctx belongs to. Outside a call
// it does nothing.
func ReportUsage(ctx context.Context, u Usage) {
	if s, ok := ctx.Value(usageKey{}).(*usageSink); ok {
		s.add(u)
	}
}
