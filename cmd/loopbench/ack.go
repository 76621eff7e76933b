package main

import (
	"context"
	"fmt"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// ackLatency sends a burst of app_mention envelopes over Socket Mode to the real Slack
// adapter in front of the real bot, and measures, for each, the time from the fake Slack
// writing the envelope to it reading the acknowledgement back. Slack wants it within 3
// seconds; the adapter acknowledges once the bot has accepted the event (stored it with
// the envelopes that arrived with it, one disk sync per batch), so the figure is what the
// adapter's receiving loop and those syncs cost while the bot is busy with the burst. The
// fake runs in a child process (slack_process.go) unless -ack-fake=inline.
func ackLatency(ctx context.Context, o options) ([]figure, error) {
	db, closeStore, err := tempStore("loopbench-ack-")
	if err != nil {
		return nil, err
	}
	defer closeStore()
	srv := llmtest.New()
	srv.SetFallback(llmtest.Func(func(llmtest.Request) llmtest.Step { return llmtest.Text("done") }))
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start model server: %w", err)
	}
	defer srv.Close()
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", MaxRetries: -1})
	if err != nil {
		return nil, fmt.Errorf("model client: %w", err)
	}
	ag, err := agent.New(agent.Config{}, client, nil)
	if err != nil {
		return nil, fmt.Errorf("new agent: %w", err)
	}
	var fake ackSlack
	where := "in a child process"
	if o.ackFake == ackFakeInline {
		where = "in this process"
		if fake, err = newInlineSlack(); err != nil {
			return nil, err
		}
	} else {
		p, err := startSlackProcess(ctx)
		if err != nil {
			return nil, err
		}
		defer p.stop()
		fake = p
	}
	// The bot runs with its defaults, as deployed: the burst's runs queue behind
	// MaxConcurrentRuns while the events keep arriving.
	sb, err := startSlackBot(ctx, fake, db, ag, bot.Config{}, o.ackEvents)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			sb.stop()
		}
	}()

	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := fake.prepare(waitCtx, o.ackEvents, o.ackDrop); err != nil {
		return nil, fmt.Errorf("prepare the burst: %w", err)
	}
	// The burst's start and end are marked in an execution trace (-trace), so that it can
	// be told apart from the scenario's setup and the runs it starts.
	trace.Log(ctx, "ack", "burst start")
	if err := fake.burst(waitCtx); err != nil {
		return nil, fmt.Errorf("burst: %w", err)
	}
	trace.Log(ctx, "ack", "burst acknowledged")
	// Every acknowledged event must also have started its run, or the figure would be that
	// of an adapter dropping work.
	runs := map[string]bool{}
	for n := range o.ackEvents {
		select {
		case h := <-sb.handled:
			if h.err != nil {
				return nil, fmt.Errorf("handle %s: %w", h.ev.ID, h.err)
			}
			if h.res.RunID == "" || h.res.Duplicate {
				return nil, fmt.Errorf("event %s started no run (%+v)", h.ev.ID, h.res)
			}
			runs[h.res.RunID] = true
		case <-waitCtx.Done():
			return nil, fmt.Errorf("%d of %d events handled: %w", n, o.ackEvents, context.Cause(waitCtx))
		}
	}
	if len(runs) != o.ackEvents {
		return nil, fmt.Errorf("%d events started %d runs", o.ackEvents, len(runs))
	}
	stopped = true
	if err := sb.stop(); err != nil {
		return nil, err
	}

	// The acks are read once the adapter has stopped, so that a late one (a redelivery's)
	// is among them.
	acks, err := fake.acks(ctx)
	if err != nil {
		return nil, err
	}
	lat, err := ackLatencies(o.ackEvents, acks)
	if err != nil {
		return nil, err
	}
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	note := fmt.Sprintf("%d app_mention envelopes sent back to back over Socket Mode, each in its own channel, by the fake Slack %s to the Slack adapter and a bot with default settings (model answering at once, real store): envelope written to ack read", len(lat), where)
	return []figure{
		{Key: "ack_p50_ms", Value: ms(p50), Unit: "ms", Note: note},
		{Key: "ack_p99_ms", Value: ms(p99), Unit: "ms", Note: fmt.Sprintf("same burst; the slowest ack took %s", lat[len(lat)-1].Round(time.Microsecond))},
		{Key: "ack_accept_commits", Value: float64(sb.h.accepts.Load()), Unit: "commits", Note: "same burst: the Accept calls that made the envelopes durable before their acks, each one write and one fdatasync of the store's intake journal (a bbolt commit, two syncs, while the journal is not ready)"},
	}, nil
}

// ackLatencies checks that acks are one ack of each of the burst's n envelopes (env-0 ..
// env-n-1), each of its only delivery, and returns their latencies, sorted. A redelivered
// envelope means the socket dropped, and its latency would be the redelivery's alone.
func ackLatencies(n int, acks []ackRecord) ([]time.Duration, error) {
	seen := make(map[string]bool, n)
	lat := make([]time.Duration, 0, n)
	for _, a := range acks {
		i, err := strconv.Atoi(strings.TrimPrefix(a.EnvelopeID, "env-"))
		switch {
		case !strings.HasPrefix(a.EnvelopeID, "env-") || err != nil || i < 0 || i >= n || a.EnvelopeID != fmt.Sprintf("env-%d", i):
			return nil, fmt.Errorf("an ack of envelope %q, which the burst did not send", a.EnvelopeID)
		case a.Deliveries != 1:
			return nil, fmt.Errorf("envelope %s was delivered %d times: the socket dropped", a.EnvelopeID, a.Deliveries)
		case seen[a.EnvelopeID]:
			return nil, fmt.Errorf("envelope %s was acknowledged twice", a.EnvelopeID)
		}
		seen[a.EnvelopeID] = true
		lat = append(lat, a.Latency)
	}
	if len(lat) != n {
		return nil, fmt.Errorf("%d of %d envelopes acknowledged", len(lat), n)
	}
	slices.Sort(lat)
	return lat, nil
}

// percentile returns the p-th percentile of sorted ds by the nearest-rank method: the
// smallest value at least p percent of the values are at or below.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
