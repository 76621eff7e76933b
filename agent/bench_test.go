package agent_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

var fixedNow = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

// BenchmarkStep measures the loop's own cost of one step: an instant model asks for one
// instant tool call, and the checkpoint marshals the state to JSON as a store does before it
// writes. Each iteration is a run of stepsPerRun steps, so the figure includes the growth of
// the state a real run has; ns/step is the figure to read.
func BenchmarkStep(b *testing.B) {
	const stepsPerRun = 10
	tool := &fakeTool{name: "look", readOnly: true, idempotent: true, fn: func(context.Context, json.RawMessage) (string, error) {
		return "a short result of the kind a directory listing gives", nil
	}}
	model := modelFunc(func(ctx context.Context, req agent.Request) (agent.Reply, error) {
		n := len(req.Messages)
		if n >= 2*stepsPerRun {
			return agent.Reply{Message: agent.Message{Role: agent.RoleAssistant, Content: "done"}}, nil
		}
		return agent.Reply{Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{
			{ID: "c" + strconv.Itoa(n), Name: "look", Arguments: `{"q":"dir-` + strconv.Itoa(n) + `"}`},
		}}, Usage: agent.Usage{PromptTokens: 500, CompletionTokens: 20, Calls: 1}}, nil
	})
	ag, err := agent.New(agent.Config{}, model, []agent.Tool{tool})
	if err != nil {
		b.Fatal(err)
	}
	hooks := agent.Hooks{Checkpoint: func(ctx context.Context, st *agent.State) error {
		_, err := json.Marshal(st)
		return err
	}}
	ctx := context.Background()
	b.ReportAllocs()
	steps := 0
	for b.Loop() {
		st := agent.NewState("bench", "benchmark the loop", nil, fixedNow)
		if err := ag.Run(ctx, st, hooks); err != nil || st.Status != agent.StatusCompleted {
			b.Fatalf("run ended %s: %v", st.Status, err)
		}
		steps += st.Step
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/step")
}

// modelFunc is an in-process model: the benchmark measures the loop's own cost, so its model
// answers at once, without HTTP.
type modelFunc func(ctx context.Context, req agent.Request) (agent.Reply, error)

func (f modelFunc) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	return f(ctx, req)
}
