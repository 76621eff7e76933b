package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// chatCalls runs one long run of slow model steps through the real Slack adapter, bot,
// store and model client, against the fake Slack, and counts the Web API calls the run
// made: every call, and the most chat.update edits of one channel within any second, which
// the bot's EditInterval pacing must keep low.
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
	ag, err := agent.New(agent.Config{MaxSteps: 2*o.chatSteps + 10, NoProgressSteps: noProgressOff}, client, []agent.Tool{instantTool{name: "look", output: "a short result"}})
	if err != nil {
		return nil, fmt.Errorf("new agent: %w", err)
	}

	const editInterval = time.Second
	fake, err := newInlineSlack()
	if err != nil {
		return nil, err
	}
	sb, err := startSlackBot(ctx, fake, db, ag, bot.Config{EditInterval: agent.Duration(editInterval)}, 1)
	if err != nil {
		return nil, err
	}
	if err := fake.Send("events_api", "env-chat", mention("Ev-chat", "C1", "1700000000.000001", "look at everything")); err != nil {
		sb.stop()
		return nil, fmt.Errorf("send mention: %w", err)
	}
	var runID string
	select {
	case h := <-sb.handled:
		if h.err != nil || h.res.RunID == "" {
			sb.stop()
			return nil, fmt.Errorf("mention started no run: %+v, %v", h.res, h.err)
		}
		runID = h.res.RunID
	case <-time.After(30 * time.Second):
		sb.stop()
		return nil, errors.New("the mention was not handled within 30s")
	}
	// A run of n slow steps takes at least n times the latency; the rest is a generous margin
	// for the outbox to drain at one call a second.
	limit := time.Duration(o.chatSteps)*o.chatLatency*3 + time.Minute
	waitErr := settle(ctx, db, runID, limit)
	if err := sb.stop(); err != nil {
		return nil, err
	}
	if waitErr != nil {
		return nil, waitErr
	}

	// The calls of the connection itself (auth.test, apps.connections.open) are not the
	// run's; everything else is.
	var r recorder
	perMethod := map[string]int{}
	for _, c := range fake.Calls() {
		kind := ""
		switch c.Method {
		case "auth.test", "apps.connections.open":
			continue
		case "chat.update":
			kind = "update"
		case "chat.postMessage":
			kind = "post"
		default:
			kind = c.Method
		}
		if c.Status != http.StatusOK {
			return nil, fmt.Errorf("%s answered %d", c.Method, c.Status)
		}
		perMethod[c.Method]++
		r.calls = append(r.calls, platformCall{kind: kind, channel: c.Values.Get("channel"), at: c.At})
	}
	calls, edits := r.counts(editInterval)
	var methods []string
	for m, n := range perMethod {
		methods = append(methods, fmt.Sprintf("%s %d", m, n))
	}
	slices.Sort(methods)
	return []figure{
		{Key: "chat_calls", Value: float64(calls), Unit: "calls",
			Note: fmt.Sprintf("Slack Web API calls (%s) for one run of %d steps at %s model latency, through the Slack adapter to the fake Slack, EditInterval %s",
				strings.Join(methods, ", "), o.chatSteps, o.chatLatency, editInterval)},
		{Key: "max_edits_per_s", Value: float64(edits), Unit: "edits",
			Note: fmt.Sprintf("most chat.update calls to one channel in any 1-second window of the same run, by their arrival at the fake; the closest two arrived %s apart",
				r.minGap("update").Round(time.Microsecond))},
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

// recorder is a bot.Platform that accepts every call and timestamps it; chatCalls also
// fills one from the fake Slack's record to count its edits.
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

// minGap returns the shortest time between two consecutive calls of kind to one channel,
// zero when no channel had two.
func (r *recorder) minGap(kind string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var gap time.Duration
	found := false
	last := map[string]time.Time{}
	for _, c := range r.calls {
		if c.kind != kind {
			continue
		}
		if prev, ok := last[c.channel]; ok && (!found || c.at.Sub(prev) < gap) {
			gap, found = c.at.Sub(prev), true
		}
		last[c.channel] = c.at
	}
	return gap
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
