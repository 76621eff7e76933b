package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// promptTokenRatio runs one tool-heavy scripted task twice through the real model client,
// once with context management and once keeping the full history, and compares the prompt
// tokens the server received. Tokens are counted on the wire (characters/4 of what each
// request carried), so the figure is what an endpoint would bill.
func promptTokenRatio(ctx context.Context, o options) ([]figure, error) {
	managed, err := promptTokens(ctx, o, agent.Config{ContextTokens: 12000})
	if err != nil {
		return nil, fmt.Errorf("with context management: %w", err)
	}
	full, err := promptTokens(ctx, o, agent.Config{ContextTokens: 1 << 30, KeepRecent: 1000})
	if err != nil {
		return nil, fmt.Errorf("with full history: %w", err)
	}
	return []figure{{
		Key:   "prompt_token_ratio",
		Value: float64(managed) / float64(full),
		Unit:  "ratio",
		Note: fmt.Sprintf("%d tool calls of %d KB each, then an answer, over HTTP: %d prompt tokens with ContextTokens 12000, %d with full history",
			o.promptSteps, o.outputKB, managed, full),
	}}, nil
}

// promptTokens runs the scripted task with the given context settings and returns the
// prompt tokens sent, after checking that the task completed.
func promptTokens(ctx context.Context, o options, cfg agent.Config) (int, error) {
	// The script counts the requests that offer tools rather than reading the conversation,
	// because context management may shorten what the request shows of earlier steps.
	var asked atomic.Int64
	srv := llmtest.New()
	srv.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		if len(r.Tools) == 0 {
			return llmtest.Text("done")
		}
		n := asked.Add(1)
		if n > int64(o.promptSteps) {
			return llmtest.Text("done")
		}
		return llmtest.ToolCalls(llmtest.Call("fetch", fmt.Sprintf(`{"n":%d}`, n)))
	}))
	if err := srv.Start(); err != nil {
		return 0, fmt.Errorf("start model server: %w", err)
	}
	defer srv.Close()
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", MaxRetries: -1})
	if err != nil {
		return 0, fmt.Errorf("model client: %w", err)
	}
	tool := instantTool{name: "fetch", output: strings.Repeat("0123456789abcdef\n", o.outputKB*1024/17+1)[:o.outputKB*1024]}
	cfg.MaxSteps = 2*o.promptSteps + 10
	ag, err := agent.New(cfg, client, []agent.Tool{tool})
	if err != nil {
		return 0, fmt.Errorf("new agent: %w", err)
	}
	st := agent.NewState("prompt", "fetch every page and summarise them", nil, time.Now())
	if err := ag.Run(ctx, st, agent.Hooks{Checkpoint: func(context.Context, *agent.State) error { return nil }}); err != nil {
		return 0, fmt.Errorf("run: %w", err)
	}
	if st.Status != agent.StatusCompleted || st.Answer != "done" {
		return 0, fmt.Errorf("run ended %s with answer %q, want completed with done", st.Status, st.Answer)
	}
	var calls int
	for _, c := range st.Calls {
		if c.Status == agent.CallSucceeded {
			calls++
		}
	}
	if calls != o.promptSteps {
		return 0, fmt.Errorf("run made %d successful calls, want %d", calls, o.promptSteps)
	}
	tokens := 0
	for _, r := range srv.Requests() {
		tokens += r.Chars() / 4
	}
	return tokens, nil
}
