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

// gpt-4o's list prices (openai.com/api/pricing), at which the planner scenario's costs are
// counted: the model client prices the usage each scripted reply reports.
var benchPrice = llm.Price{PromptPerMillion: 2.50, CompletionPerMillion: 10}

// planOutcome is what one way of running the planner scenario's task cost.
type planOutcome struct {
	tokens int // prompt tokens on the wire
	cost   float64
	steps  int
	wall   time.Duration
}

// plannerRatio runs one scripted multi-step task both ways: planned (a planner, one executor
// a part with its own small context, parts in parallel, a last step that combines them) and
// in one loop that carries everything. Seed 001 claims small per-step contexts save tokens;
// the figures say whether they do here, and what parallel parts do to the wall time.
func plannerRatio(ctx context.Context, o options) ([]figure, error) {
	one, err := planRun(ctx, o, false)
	if err != nil {
		return nil, fmt.Errorf("one loop: %w", err)
	}
	planned, err := planRun(ctx, o, true)
	if err != nil {
		return nil, fmt.Errorf("planned: %w", err)
	}
	task := fmt.Sprintf("%d parts of %d fetches of %d KB each, then a combined answer; model latency %s, %d executors at once",
		o.planParts, o.planFetches, o.outputKB, o.planLatency, o.planParts)
	describe := func(p planOutcome) string {
		return fmt.Sprintf("%d prompt tokens, $%.4f, %d model calls, %s", p.tokens, p.cost, p.steps, p.wall.Round(time.Millisecond))
	}
	return []figure{{
		Key:   "planner_token_ratio",
		Value: float64(planned.tokens) / float64(one.tokens),
		Unit:  "ratio",
		Note:  fmt.Sprintf("%s: planned %s; one loop %s (cost ratio %.2f)", task, describe(planned), describe(one), planned.cost/one.cost),
	}, {
		Key:   "planner_makespan_ratio",
		Value: float64(planned.wall) / float64(one.wall),
		Unit:  "ratio",
		Note:  "same runs: wall time planned over one loop",
	}}, nil
}

// planRun runs the task once, planned or in one loop, and checks that it completed.
func planRun(ctx context.Context, o options, planned bool) (planOutcome, error) {
	var asked atomic.Int64
	total := o.planParts * o.planFetches
	srv := llmtest.New()
	srv.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		return llmtest.Delay(o.planLatency, planReply(r, o, total, &asked).
			WithUsage(llmtest.Usage{PromptTokens: r.Chars() / 4, CompletionTokens: 30}))
	}))
	if err := srv.Start(); err != nil {
		return planOutcome{}, fmt.Errorf("start model server: %w", err)
	}
	defer srv.Close()
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", MaxRetries: -1, Price: benchPrice})
	if err != nil {
		return planOutcome{}, fmt.Errorf("model client: %w", err)
	}
	tool := instantTool{name: "fetch", output: strings.Repeat("0123456789abcdef\n", o.outputKB*1024/17+1)[:o.outputKB*1024]}
	// Both ways run with the default context management.
	cfg := agent.Config{MaxSteps: 4*total + 20, NoProgressSteps: noProgressOff, MaxParallelSteps: o.planParts}
	if planned {
		cfg.Planning = agent.PlanningAuto
	}
	ag, err := agent.New(cfg, client, []agent.Tool{tool})
	if err != nil {
		return planOutcome{}, fmt.Errorf("new agent: %w", err)
	}
	st := agent.NewState("planner", "gather every part and combine them", nil, time.Now())
	start := time.Now()
	if err := ag.Run(ctx, st, agent.Hooks{Checkpoint: func(context.Context, *agent.State) error { return nil }}); err != nil {
		return planOutcome{}, fmt.Errorf("run: %w", err)
	}
	wall := time.Since(start)
	if st.Status != agent.StatusCompleted || !strings.Contains(st.Answer, "combined") {
		return planOutcome{}, fmt.Errorf("run ended %s with answer %q, want completed and combined", st.Status, st.Answer)
	}
	if planned && (st.Planning == nil || len(st.Planning.Steps) != o.planParts+1) {
		return planOutcome{}, fmt.Errorf("the run was not planned as scripted")
	}
	var fetched int
	for _, c := range st.AllCalls() {
		if c.Status == agent.CallSucceeded {
			fetched++
		}
	}
	if fetched != total {
		return planOutcome{}, fmt.Errorf("run made %d successful calls, want %d", fetched, total)
	}
	return planOutcome{tokens: wireTokens(srv.Requests()), cost: st.Usage.Cost, steps: st.Usage.Calls, wall: wall}, nil
}

// planReply is the scripted model of the planner scenario: the planner's plan and reviews,
// each executor's fetches for its part, and the one loop's fetches of every part.
func planReply(r llmtest.Request, o options, total int, asked *atomic.Int64) llmtest.Step {
	last := r.LastMessage().Content
	switch {
	case r.ResponseFormat == "json_object" && strings.Contains(last, " reports: "):
		return llmtest.Text(`{"verdict": "accept", "reason": "the part is gathered"}`)
	case r.ResponseFormat == "json_object":
		var steps, ids []string
		for i := range o.planParts {
			id := fmt.Sprintf("p%d", i+1)
			ids = append(ids, `"`+id+`"`)
			steps = append(steps, fmt.Sprintf(`{"id": %q, "description": "gather part %d", "scope": "full"}`, id, i+1))
		}
		steps = append(steps, `{"id": "combine", "description": "combine the parts", "depends_on": [`+strings.Join(ids, ",")+`], "scope": "full"}`)
		return llmtest.Text(`{"needs_plan": true, "steps": [` + strings.Join(steps, ",") + `]}`)
	case len(r.Tools) == 0:
		return llmtest.Text("combined (final answer)")
	}
	step := ""
	for _, m := range r.Messages {
		if _, rest, ok := strings.Cut(m.Content, "Your step ("); ok && m.Role == "user" {
			step, _, _ = strings.Cut(rest, ")")
			break
		}
	}
	switch step {
	case "":
		if n := asked.Add(1); n <= int64(total) {
			return llmtest.ToolCalls(llmtest.Call("fetch", fmt.Sprintf(`{"n":%d}`, n)))
		}
		return llmtest.Text("combined: every part gathered")
	case "combine":
		return llmtest.Text("combined: every part gathered")
	}
	results := 0
	for _, m := range r.Messages {
		if m.Role == "tool" {
			results++
		}
	}
	if results < o.planFetches {
		return llmtest.ToolCalls(llmtest.Call("fetch", fmt.Sprintf(`{"n":%d}`, results+1)))
	}
	return llmtest.Text("part " + step + " gathered")
}
