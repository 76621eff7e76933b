package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// OpenAI's automatic prompt caching, as published for the gpt-4o family: a prompt prefix the
// endpoint has seen recently is billed at half the input price (gpt-4o: $2.50 per million
// input tokens, $1.25 cached; "Prompt Caching in the API", openai.com, October 2024). Only
// prompts of at least 1024 tokens are cached, and a hit covers the shared prefix in steps
// of 128 tokens (OpenAI cookbook, "Prompt Caching 201").
const (
	cachedInputPrice = 0.5
	cacheMinTokens   = 1024
	cacheStepTokens  = 128
)

// promptTokenRatio runs one tool-heavy scripted task twice through the real model client,
// once with context management (the defaults at a ContextTokens of -prompt-budget: outputs
// capped as they come back, older ones cut in blocks) and once as a naive loop that sends
// the whole history and every output in full, and compares the prompt tokens the server
// received. Tokens are counted on the wire (characters/4 of what each request carried), so
// the figure is what an endpoint would bill. The task's outputs are realistic in size and
// shape (prompt_outputs.go), and the managed run must show the model the first and the last
// line of each output when it comes back.
//
// The same requests give the figures of prompt caching: how much of each managed prompt
// repeats the previous one's from its first byte, and what the managed run costs with
// OpenAI's cached-input discount against the full-history loop billed without any.
func promptTokenRatio(ctx context.Context, o options) ([]figure, error) {
	managed, err := promptRequests(ctx, o, agent.Config{ContextTokens: o.promptBudget, NoProgressSteps: noProgressOff})
	if err != nil {
		return nil, fmt.Errorf("with context management: %w", err)
	}
	full, err := promptRequests(ctx, o, agent.Config{ContextTokens: 1 << 30, KeepRecent: 1000, OutputCap: -1, NoProgressSteps: noProgressOff})
	if err != nil {
		return nil, fmt.Errorf("with full history: %w", err)
	}
	managedTokens, fullTokens := wireTokens(managed), wireTokens(full)
	prefix := prefixShare(managed)
	cached, naive := cachedCost(managed), uncachedCost(full)
	return []figure{{
		Key:   "prompt_token_ratio",
		Value: float64(managedTokens) / float64(fullTokens),
		Unit:  "ratio",
		Note: fmt.Sprintf("%d tool calls of %d KB on average (test logs, pages, listings), then an answer, over HTTP: %d prompt tokens with ContextTokens %d (outputs capped at %d bytes), %d with full history",
			o.promptSteps, o.outputKB, managedTokens, o.promptBudget, agent.Config{ContextTokens: o.promptBudget}.Defaults().OutputCap, fullTokens),
	}, {
		Key:   "cache_prefix_ratio",
		Value: prefix,
		Unit:  "ratio",
		Note: fmt.Sprintf("same managed run: bytes of each request's tools and messages (JSON) that repeat the previous request's from the first byte, over its own, averaged over requests 2-%d (full history: %.2f)",
			len(managed), prefixShare(full)),
	}, {
		Key:   "cached_cost_ratio",
		Value: cached / naive,
		Unit:  "ratio",
		Note: fmt.Sprintf("same runs, tokens as bytes/4: managed with cached prefixes at %.0f%% of the input price (gpt-4o; >= %d tokens, %d-token steps) over full history without caching (full history with caching: %.2f)",
			100*cachedInputPrice, cacheMinTokens, cacheStepTokens, cachedCost(full)/naive),
	}}, nil
}

// promptRequests runs the scripted task with the given context settings and returns the
// requests the model server received, after checking that the task completed.
func promptRequests(ctx context.Context, o options, cfg agent.Config) ([]llmtest.Request, error) {
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
		return nil, fmt.Errorf("start model server: %w", err)
	}
	defer srv.Close()
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", MaxRetries: -1})
	if err != nil {
		return nil, fmt.Errorf("model client: %w", err)
	}
	tool := outputsTool{name: "fetch", meanKB: o.outputKB}
	cfg.MaxSteps = 2*o.promptSteps + 10
	ag, err := agent.New(cfg, client, []agent.Tool{tool})
	if err != nil {
		return nil, fmt.Errorf("new agent: %w", err)
	}
	st := agent.NewState("prompt", "fetch every page and summarise them", nil, time.Now())
	if err := ag.Run(ctx, st, agent.Hooks{Checkpoint: func(context.Context, *agent.State) error { return nil }}); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if st.Status != agent.StatusCompleted || st.Answer != "done" {
		return nil, fmt.Errorf("run ended %s with answer %q, want completed with done", st.Status, st.Answer)
	}
	var calls int
	for _, c := range st.Calls {
		if c.Status == agent.CallSucceeded {
			calls++
		}
	}
	if calls != o.promptSteps {
		return nil, fmt.Errorf("run made %d successful calls, want %d", calls, o.promptSteps)
	}
	reqs := srv.Requests()
	if err := checkSeen(reqs, o.promptSteps, o.outputKB); err != nil {
		return nil, err
	}
	return reqs, nil
}

// wireTokens is the prompt tokens of the requests, characters/4 of what each carried.
func wireTokens(reqs []llmtest.Request) int {
	tokens := 0
	for _, r := range reqs {
		tokens += r.Chars() / 4
	}
	return tokens
}

// cacheKey is what a provider's prompt cache matches a request on, in the order it hashes
// it: the tool specs, then the messages, each as JSON. Fields that are not part of the
// prompt (the model, stream flags) are left out.
func cacheKey(r llmtest.Request) []byte {
	var b []byte
	for _, t := range r.Tools {
		j, _ := json.Marshal(t) // a struct of strings and raw JSON that decoded cleanly
		b = append(b, j...)
	}
	for _, m := range r.Messages {
		j, _ := json.Marshal(m)
		b = append(b, j...)
	}
	return b
}

// sharedPrefix is the length of the longest common prefix of a and b.
func sharedPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// prefixShare is, for each request after the first, the share of its cache key that repeats
// the previous request's from the first byte, averaged over those requests. The first
// request has nothing before it to repeat and is left out.
func prefixShare(reqs []llmtest.Request) float64 {
	if len(reqs) < 2 {
		return 0
	}
	sum := 0.0
	prev := cacheKey(reqs[0])
	for _, r := range reqs[1:] {
		key := cacheKey(r)
		sum += float64(sharedPrefix(prev, key)) / float64(len(key))
		prev = key
	}
	return sum / float64(len(reqs)-1)
}

// cachedCost is the input cost of the requests, in full-price tokens, when each request's
// prefix shared with the one before is billed at the cached price. Tokens are bytes/4 of the
// cache key; a provider caches only from cacheMinTokens and in steps of cacheStepTokens.
func cachedCost(reqs []llmtest.Request) float64 {
	cost := 0.0
	var prev []byte
	for _, r := range reqs {
		key := cacheKey(r)
		total := len(key) / 4
		hit := sharedPrefix(prev, key) / 4
		if total < cacheMinTokens || hit < cacheMinTokens {
			hit = 0
		}
		hit -= hit % cacheStepTokens
		cost += float64(total-hit) + cachedInputPrice*float64(hit)
		prev = key
	}
	return cost
}

// uncachedCost is the input cost of the requests, in full-price tokens, with no caching.
func uncachedCost(reqs []llmtest.Request) float64 {
	cost := 0.0
	for _, r := range reqs {
		cost += float64(len(cacheKey(r)) / 4)
	}
	return cost
}
