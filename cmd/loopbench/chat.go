package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// chatCalls runs one long run of slow model steps through the real bot, store and model
// client, and counts what the bot asked of the platform: every call, and the most edits to
// one channel within any second, which the bot's EditInterval pacing must keep low.
func chatCalls(ctx context.Context, o options) ([]figure, error) {
	db, closeStore, err := tempStore("loopbench-chat-")
	if err != nil {
		return nil, err
	}
	defer closeStore()

	var asked atomic.Int64
	srv := llmtest.New()
	srv.SetFallback(llmtest.Delay(o.chatLatency, llmtest.Func(func(r llmtest.Request) llmtest.Step {
		if n := asked.Add(1); len(r.Tools) > 0 && n < int64(o.chatSteps) {
			return llmtest.ToolCalls(llmtest.Call("look", fmt.Sprintf(`{"n":%d}`, n)))
		}
		return llmtest.Text("done")
	})))
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start model server: %w", err)
	}
	defer srv.Close()
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", MaxRetries: -1})
	if err != nil {
		return nil, fmt.Errorf("model client: %w", err)
	}
	ag, err := agent.New(agent.Config{MaxSteps: 2*o.chatSteps + 10}, client, []agent.Tool{instantTool{name: "look", output: "a short result"}})
	if err != nil {
		return nil, fmt.Errorf("new agent: %w", err)
	}

	const editInterval = time.Second
	plat := &recorder{}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := bot.New(bot.Config{EditInterval: bot.Duration(editInterval)}, db, ag, []bot.Platform{plat}, bot.WithLogger(logger))
	if err != nil {
		return nil, fmt.Errorf("new bot: %w", err)
	}
	if err := b.Start(ctx); err != nil {
		return nil, fmt.Errorf("start bot: %w", err)
	}
	res, err := b.Handle(ctx, bot.Event{Kind: bot.EventMention, ID: "ev-1", Thread: benchThread, User: benchUser, Text: "look at everything", At: time.Now()})
	if err != nil {
		return nil, fmt.Errorf("handle mention: %w", err)
	}
	// A run of n slow steps takes at least n times the latency; the rest is a generous margin
	// for the outbox to drain at one call a second.
	limit := time.Duration(o.chatSteps)*o.chatLatency*3 + time.Minute
	waitErr := settle(ctx, db, res.RunID, limit)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.Stop(stopCtx); err != nil {
		return nil, fmt.Errorf("stop bot: %w", err)
	}
	if waitErr != nil {
		return nil, waitErr
	}

	calls, edits := plat.counts(editInterval)
	// The issue asks for Slack Web API calls through adapters/slack against a fake Slack;
	// that package has no importable fake yet, so the bot talks to a recording platform.
	note := "recording bot.Platform, not Slack Web API calls (adapters/slack has no importable fake Slack)"
	return []figure{
		{Key: "chat_calls", Value: float64(calls), Unit: "calls",
			Note: fmt.Sprintf("platform calls for one run of %d steps at %s model latency, EditInterval %s; %s", o.chatSteps, o.chatLatency, editInterval, note)},
		{Key: "max_edits_per_s", Value: float64(edits), Unit: "edits",
			Note: "most Update calls to one channel in any 1-second window of the same run"},
	}, nil
}

// settle waits until the run has completed and the outbox is empty. It polls the store,
// since the bot tells nobody when its outbox drains; a command may poll where a test may not.
func settle(ctx context.Context, db *store.DB, runID string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var status agent.Status
		var pending int
		err := db.View(ctx, func(tx bot.Tx) error {
			rec, err := tx.Run(runID)
			if err != nil {
				return err
			}
			status = rec.Status
			items, err := tx.Outbox()
			pending = len(items)
			return err
		})
		if err != nil {
			return fmt.Errorf("read run: %w", err)
		}
		if status.Terminal() && status != agent.StatusCompleted {
			return fmt.Errorf("run ended %s, want completed", status)
		}
		if status.Paused() {
			return fmt.Errorf("run paused (%s), want completed", status)
		}
		if status == agent.StatusCompleted && pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("run %s with %d messages to send: %w", status, pending, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// recorder is a bot.Platform that accepts every call and timestamps it.
type recorder struct {
	mu    sync.Mutex
	calls []platformCall
}

type platformCall struct {
	kind    string // post, update or notify
	channel string
	at      time.Time
}

var _ bot.Platform = (*recorder)(nil)

func (r *recorder) Name() string { return benchThread.Platform }

func (r *recorder) Post(ctx context.Context, th bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	n := r.record("post", th.Channel)
	return bot.MessageRef{Thread: th, ID: fmt.Sprintf("m%d", n)}, nil
}

func (r *recorder) Update(ctx context.Context, ref bot.MessageRef, msg bot.Message) error {
	r.record("update", ref.Thread.Channel)
	return nil
}

func (r *recorder) Notify(ctx context.Context, th bot.ThreadRef, userID, text string) error {
	r.record("notify", th.Channel)
	return nil
}

// record stores one call and returns how many calls there have been.
func (r *recorder) record(kind, channel string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, platformCall{kind: kind, channel: channel, at: time.Now()})
	return len(r.calls)
}

// counts returns the number of calls and the most updates to one channel within any window
// of the given length (half-open, so two edits exactly one window apart fall in two).
func (r *recorder) counts(window time.Duration) (calls, maxUpdates int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	byChannel := map[string][]time.Time{}
	for _, c := range r.calls {
		if c.kind == "update" {
			byChannel[c.channel] = append(byChannel[c.channel], c.at)
		}
	}
	for _, ts := range byChannel {
		// ts is in call order, which is time order: record takes the lock before time.Now.
		start := 0
		for end := range ts {
			for ts[end].Sub(ts[start]) >= window {
				start++
			}
			maxUpdates = max(maxUpdates, end-start+1)
		}
	}
	return len(r.calls), maxUpdates
}
