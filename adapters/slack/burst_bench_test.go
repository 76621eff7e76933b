package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
	"github.com/loopbot/loopbot/bot"
)

// BenchmarkSocketBurst is loopbench's ack scenario without the bot: bursts of 500
// app_mention envelopes written back to back by the fake Slack, in this process, to the
// Socket Mode receiving loop, whose handler accepts them at once (no store). An op is one
// burst, the fake's writing and reading of acks included, as in loopbench; ns/envelope is
// its time divided by its envelopes.
func BenchmarkSocketBurst(b *testing.B) {
	const burst = 500
	fake, a := benchAdapter(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	h := &instantAcceptor{}
	go func() { done <- a.Run(ctx, h) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	}()
	if err := fake.WaitConnections(ctx, 1); err != nil {
		b.Fatal(err)
	}
	sent := 0
	payloads := make([]json.RawMessage, burst)
	ids := make([]string, burst)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		// A burst comes once the one before is handled, as the workers' queues are
		// bounded.
		for deadline := time.Now().Add(time.Minute); h.handled.Load() < int64(sent); {
			if time.Now().After(deadline) {
				b.Fatal("the burst was not handled")
			}
			time.Sleep(time.Millisecond)
		}
		for j := range payloads {
			n := sent + j
			ids[j] = fmt.Sprintf("env-%d", n)
			payloads[j], _ = json.Marshal(slackfake.MentionCallback(fmt.Sprintf("Ev%d", n), fmt.Sprintf("C%d", n),
				fmt.Sprintf("1700000000.%06d", n%1000000+1), "", "<@"+slackfake.BotUserID+"> check the build"))
		}
		b.StartTimer()
		for j, p := range payloads {
			if err := fake.Send("events_api", ids[j], p); err != nil {
				b.Fatal(err)
			}
		}
		sent += burst
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		if err := fake.WaitAcks(wctx, sent); err != nil {
			b.Fatal(err)
		}
		wcancel()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(sent), "ns/envelope")
}

// instantAcceptor accepts every event at once and handles it by doing nothing.
type instantAcceptor struct {
	mu      sync.Mutex
	seen    map[string]bool
	handled atomic.Int64
}

func (r *instantAcceptor) Accept(_ context.Context, evs []bot.Event) ([]bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	added := make([]bool, len(evs))
	for i, ev := range evs {
		added[i] = !r.seen[ev.ID]
		r.seen[ev.ID] = true
	}
	return added, nil
}

func (r *instantAcceptor) Handle(context.Context, bot.Event) (bot.Result, error) {
	r.handled.Add(1)
	return bot.Result{}, nil
}

// BenchmarkAckBatch is the acker's writing of a full batch's acks (maxBatch of them) on
// the Socket Mode connection to the fake Slack, which reads them on its own goroutine; an
// op is one batch.
func BenchmarkAckBatch(b *testing.B) {
	fake, a := benchAdapter(b)
	sc := newSocketClient(a)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.run(ctx, func(envelope) {}) }()
	defer func() {
		cancel()
		<-done
	}()
	if err := fake.WaitConnections(ctx, 1); err != nil {
		b.Fatal(err)
	}
	acks := make([]ackFrame, maxBatch)
	for i := range acks {
		acks[i].envelopeID = fmt.Sprintf("env-%d", i)
	}
	// The connection is the client's once the fake has said hello on it.
	for deadline := time.Now().Add(time.Minute); sc.ack(acks[:1]) != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("no connection")
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := sc.ack(acks); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(acks)), "ns/ack")
}

// benchAdapter is a fake Slack, closed when b ends, and an adapter that talks to it.
func benchAdapter(b *testing.B) (*slackfake.Server, *Adapter) {
	b.Helper()
	fake, err := slackfake.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(fake.Close)
	a, err := New(Config{BotToken: "xoxb-bench", AppToken: "xapp-1-bench", APIURL: fake.APIURL()},
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	return fake, a
}
