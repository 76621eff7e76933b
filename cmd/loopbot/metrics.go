package main

import (
	"context"
	"errors"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// metrics holds loopbot's Prometheus metrics (promtext.go). They are gathered by decorating
// the model, the tools and the platforms at wiring time, so the core packages stay free of
// any metrics code.
type metrics struct {
	reg *registry

	modelCalls  *counterVec
	modelTokens *counterVec
	modelCost   *counterVec
	toolCalls   *counterVec
	toolSeconds *histogramVec
	chatCalls   *counterVec
	chatLimited *counterVec
	approvals   *histogramVec
	abandoned   *counterVec
	quarantined *counterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: newRegistry(),
		modelCalls: newCounterVec(opts{name: "loopbot_model_calls_total", help: "Model consultations by role (executor, summarizer, sanity) and outcome.",
			labels: []string{"role", "outcome"}}),
		modelTokens: newCounterVec(opts{name: "loopbot_model_tokens_total", help: "Model tokens by role and kind (prompt, completion, cached).",
			labels: []string{"role", "kind"}}),
		modelCost: newCounterVec(opts{name: "loopbot_model_cost_dollars_total", help: "Model cost in US dollars by role, from the configured prices.",
			labels: []string{"role"}}),
		toolCalls: newCounterVec(opts{name: "loopbot_tool_calls_total", help: "Tool calls by tool and outcome (ok, error).",
			labels: []string{"tool", "outcome"}}),
		toolSeconds: newHistogramVec(opts{name: "loopbot_tool_call_seconds", help: "Duration of tool calls.",
			labels: []string{"tool"}}, exponentialBuckets(0.005, 4, 9)),
		chatCalls: newCounterVec(opts{name: "loopbot_chat_api_calls_total", help: "Chat platform API calls by platform, method and outcome.",
			labels: []string{"platform", "method", "outcome"}}),
		chatLimited: newCounterVec(opts{name: "loopbot_chat_rate_limited_total", help: "Chat platform rate-limit answers by platform.",
			labels: []string{"platform"}}),
		approvals: newHistogramVec(opts{name: "loopbot_approval_wait_seconds", help: "Time from an approval request to its decision, by outcome.",
			labels: []string{"outcome"}}, exponentialBuckets(1, 3, 9)),
		abandoned: newCounterVec(opts{name: "loopbot_tool_calls_abandoned_total", help: "Tool calls the loop stopped waiting for because they did not return after their context ended.",
			labels: []string{"tool"}}),
		quarantined: newCounterVec(opts{name: "loopbot_store_quarantined_total", help: "Stored records moved to the quarantine because they did not decode, by bucket.",
			labels: []string{"bucket"}}),
	}
	m.reg.register(m.modelCalls, m.modelTokens, m.modelCost, m.toolCalls, m.toolSeconds, m.chatCalls, m.chatLimited, m.approvals, m.abandoned, m.quarantined)
	m.reg.register(runtimeFamilies()...)
	m.reg.register(processFamilies(time.Now())...)
	return m
}

// runStatuses are the states loopbot_runs reports.
var runStatuses = []agent.Status{agent.StatusQueued, agent.StatusRunning, agent.StatusAwaitingApproval, agent.StatusAwaitingInput,
	agent.StatusCompleted, agent.StatusFailed, agent.StatusCancelled, agent.StatusBudgetExhausted}

// countRuns reports runs by state from the store at scrape time, so the figure is right
// after a restart too.
func countRuns(s bot.Store) ([]gaugeSample, error) {
	counts := make([]int, len(runStatuses))
	// The store's status index answers this without reading a run, however long the
	// history is.
	err := s.View(context.Background(), func(tx bot.Tx) error {
		for i, st := range runStatuses {
			ids, err := tx.RunIDs(bot.RunFilter{Statuses: []agent.Status{st}})
			if err != nil {
				return err
			}
			counts[i] = len(ids)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]gaugeSample, len(runStatuses))
	for i, st := range runStatuses {
		out[i] = gaugeSample{values: []string{string(st)}, value: float64(counts[i])}
	}
	return out, nil
}

// abandonedTool counts one abandoned call of tool.
func (m *metrics) abandonedTool(tool string) { m.abandoned.WithLabelValues(tool).Inc() }

// watchAbandoned reports the abandoned calls that have still not returned: each holds a
// goroutine, and whatever the tool holds, until it does.
func (m *metrics) watchAbandoned(ag *agent.Agent) {
	m.reg.register(&gaugeFunc{opts: opts{name: "loopbot_tool_calls_abandoned_running", help: "Abandoned tool calls that have not returned yet."},
		collect: single(func() float64 {
			_, running := ag.Abandoned()
			return float64(running)
		})})
}

func (m *metrics) watchRuns(s bot.Store) {
	m.reg.register(&gaugeFunc{opts: opts{name: "loopbot_runs", help: "Runs in the database by state.", labels: []string{"state"}},
		collect: func() ([]gaugeSample, error) { return countRuns(s) }})
}

// meteredModel counts a model's calls, tokens and cost.
type meteredModel struct {
	agent.Model
	role string
	m    *metrics
}

func (mm meteredModel) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	reply, err := mm.Model.Complete(ctx, req)
	outcome := "ok"
	var rl *agent.RateLimitError
	switch {
	case errors.As(err, &rl):
		outcome = "rate_limited"
	case err != nil:
		outcome = "error"
	}
	mm.m.modelCalls.WithLabelValues(mm.role, outcome).Inc()
	if err == nil {
		u := reply.Usage
		mm.m.modelTokens.WithLabelValues(mm.role, "prompt").Add(float64(u.PromptTokens))
		mm.m.modelTokens.WithLabelValues(mm.role, "completion").Add(float64(u.CompletionTokens))
		mm.m.modelTokens.WithLabelValues(mm.role, "cached").Add(float64(u.CachedTokens))
		mm.m.modelCost.WithLabelValues(mm.role).Add(u.Cost)
	}
	return reply, err
}

// meteredTool counts a tool's calls by outcome and times them.
type meteredTool struct {
	agent.Tool
	m *metrics
}

func (mt meteredTool) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	name := mt.Info().Spec.Name
	start := time.Now()
	out, err := mt.Tool.Call(ctx, inv)
	mt.m.toolSeconds.WithLabelValues(name).Observe(time.Since(start).Seconds())
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	mt.m.toolCalls.WithLabelValues(name, outcome).Inc()
	return out, err
}

// Preview passes on the wrapped tool's preview of a call (write_file's diff), which the
// embedding would hide; a tool that previews nothing previews "".
func (mt meteredTool) Preview(ctx context.Context, inv agent.Invocation) (string, error) {
	p, ok := mt.Tool.(agent.Previewer)
	if !ok {
		return "", nil
	}
	return p.Preview(ctx, inv)
}

func (m *metrics) tools(ts []agent.Tool) []agent.Tool {
	out := make([]agent.Tool, len(ts))
	for i, t := range ts {
		out[i] = meteredTool{Tool: t, m: m}
	}
	return out
}

// meteredPlatform counts chat API calls and rate-limit answers.
type meteredPlatform struct {
	bot.Platform
	m *metrics
}

var _ bot.Platform = meteredPlatform{}

// PacedPerThread passes on the wrapped platform's pacing unit, which the embedding would hide.
func (mp meteredPlatform) PacedPerThread() bool {
	p, ok := mp.Platform.(bot.ThreadPaced)
	return ok && p.PacedPerThread()
}

func (mp meteredPlatform) count(method string, err error) {
	outcome := "ok"
	var rl *bot.RateLimitError
	switch {
	case errors.As(err, &rl):
		outcome = "rate_limited"
		mp.m.chatLimited.WithLabelValues(mp.Name()).Inc()
	case err != nil:
		outcome = "error"
	}
	mp.m.chatCalls.WithLabelValues(mp.Name(), method, outcome).Inc()
}

func (mp meteredPlatform) Post(ctx context.Context, thread bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	ref, err := mp.Platform.Post(ctx, thread, msg)
	mp.count("post", err)
	return ref, err
}

func (mp meteredPlatform) Update(ctx context.Context, ref bot.MessageRef, msg bot.Message) error {
	err := mp.Platform.Update(ctx, ref, msg)
	mp.count("update", err)
	return err
}

func (mp meteredPlatform) Notify(ctx context.Context, thread bot.ThreadRef, userID, text string) error {
	err := mp.Platform.Notify(ctx, thread, userID, text)
	mp.count("notify", err)
	return err
}
