package agenttest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// Held is a safe tool whose call reports that it started and then holds until the test frees
// it (or the call's context ends).
type Held struct {
	name, output string
	// Started is closed when the first call begins.
	Started chan struct{}
	release chan struct{}
	once    sync.Once
	freed   sync.Once
}

// NewHeld returns a held tool called name that answers output once freed. It frees itself
// when the test ends, so a bot stopping after the test is never kept waiting.
func NewHeld(t *testing.T, name, output string) *Held {
	h := &Held{name: name, output: output, Started: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(h.Free)
	return h
}

// Free lets the held call, and any later one, return.
func (h *Held) Free() { h.freed.Do(func() { close(h.release) }) }

// Info describes the tool: safe, no parameters.
func (h *Held) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: h.name, Description: "a test tool that holds until freed",
		Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
}

// Assess rates every call safe.
func (h *Held) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "the test's"}
}

// Call holds until the tool is freed or ctx ends.
func (h *Held) Call(ctx context.Context, _ agent.Invocation) (string, error) {
	h.once.Do(func() { close(h.Started) })
	select {
	case <-h.release:
		return h.output, nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}
