package bot_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// timedCall is one call a timedPlatform got: which message, and when it began and ended.
type timedCall struct {
	channel, text string
	start, end    time.Time
}

// timedPlatform takes took for every post, as over a network, and records when each began
// and ended.
type timedPlatform struct {
	took  time.Duration
	mu    sync.Mutex
	calls []timedCall
}

func (p *timedPlatform) Name() string { return "test" }

func (p *timedPlatform) Post(ctx context.Context, th bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	start := time.Now()
	time.Sleep(p.took)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, timedCall{channel: th.Channel, text: msg.Text, start: start, end: time.Now()})
	return bot.MessageRef{Thread: th, ID: fmt.Sprintf("m%d", len(p.calls))}, nil
}

func (p *timedPlatform) Update(context.Context, bot.MessageRef, bot.Message) error { return nil }

func (p *timedPlatform) Notify(context.Context, bot.ThreadRef, string, string) error { return nil }

// TestChannelsAreCalledAtOnceEachInOrder leaves four notices in each of three channels'
// outbox, interleaved in time, for a platform whose calls take 300ms. The channels are
// called at the same time, but each channel gets its notices one call at a time, in the
// order they were written, EditInterval apart.
func TestChannelsAreCalledAtOnceEachInOrder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		const (
			perChannel = 4
			interval   = time.Second
		)
		db := openStore(t)
		channels := []string{"C1", "C2", "C3"}
		at := time.Now().UTC()
		if err := db.Update(context.Background(), func(tx bot.Tx) error {
			for i := range perChannel {
				for _, c := range channels {
					at = at.Add(time.Millisecond)
					th := bot.ThreadRef{Platform: "test", Channel: c, Thread: "T1"}
					if err := tx.PutOutbox(bot.OutboxItem{Key: fmt.Sprintf("notice/%s-%d", c, i), Kind: bot.OutboxNotice, Thread: th, Text: fmt.Sprint(i), CreatedAt: at}); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		plat := &timedPlatform{took: 300 * time.Millisecond}
		ag, err := agent.New(agent.Config{}, newModel(t).client, nil)
		if err != nil {
			t.Fatal(err)
		}
		logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		b, err := bot.New(bot.Config{EditInterval: agent.Duration(interval)}, db, ag, []bot.Platform{plat}, bot.WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := b.Stop(t.Context()); err != nil {
			t.Fatalf("stop: %v", err)
		}
		synctest.Wait()

		byChannel := map[string][]timedCall{}
		for _, c := range plat.calls {
			byChannel[c.channel] = append(byChannel[c.channel], c)
		}
		for _, ch := range channels {
			calls := byChannel[ch]
			if len(calls) != perChannel {
				t.Fatalf("%s got %d notices, want %d", ch, len(calls), perChannel)
			}
			if !calls[0].start.Equal(start) {
				t.Errorf("%s's first call began %s after the others could, want at once", ch, calls[0].start.Sub(start))
			}
			for i, c := range calls {
				if c.text != fmt.Sprint(i) {
					t.Errorf("%s's call %d posted notice %q, want %d: out of order", ch, i, c.text, i)
				}
				if i > 0 && c.start.Sub(calls[i-1].end) < interval {
					t.Errorf("%s's call %d began %s after call %d ended, want %s at least", ch, i, c.start.Sub(calls[i-1].end), i-1, interval)
				}
			}
		}
		// Each channel's calls follow one another; the three channels' go side by side,
		// so the whole takes what one channel's calls take.
		if took, want := time.Since(start), perChannel*300*time.Millisecond+(perChannel-1)*interval; took != want {
			t.Errorf("the outbox took %s to send, want %s: one channel's calls", took, want)
		}
	})
}
