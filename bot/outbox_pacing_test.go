package bot_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// slowPlatform is the recording platform with calls that take time, as over a network. The
// recorder marks when the platform received a call: odd calls reach it at their end and
// even calls at their start, the order that brings two arrivals closest together.
type slowPlatform struct {
	*recorder
	took  time.Duration
	calls atomic.Int32
}

func (p *slowPlatform) Post(ctx context.Context, th bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	after := p.lag()
	defer after()
	return p.recorder.Post(ctx, th, msg)
}

func (p *slowPlatform) Update(ctx context.Context, ref bot.MessageRef, msg bot.Message) error {
	after := p.lag()
	defer after()
	return p.recorder.Update(ctx, ref, msg)
}

// lag spends the call's time before the platform receives it, or returns a function that
// spends it after.
func (p *slowPlatform) lag() (after func()) {
	if p.calls.Add(1)%2 == 1 {
		time.Sleep(p.took)
		return func() {}
	}
	return func() { time.Sleep(p.took) }
}

// TestCallsToAChannelAreEditIntervalApartAsThePlatformGetsThem runs a run of many steps,
// whose status card changes faster than it may be edited, on a platform whose every call
// takes 300ms and reaches it at varying moments within that time. Successive calls to the
// channel reach the platform at least EditInterval apart, and the card's states are still
// coalesced into about one edit per interval, ending at the final one.
func TestCallsToAChannelAreEditIntervalApartAsThePlatformGetsThem(t *testing.T) {
	bubble(t, func(t *testing.T) {
		const (
			steps    = 60
			interval = time.Second
		)
		step := &tool{name: "step", risk: agent.RiskSafe, out: "ok", delay: 100 * time.Millisecond}
		m := newModel(t)
		for i := range steps {
			m.add(use("step", fmt.Sprintf(`{"q":"%d"}`, i)))
		}
		m.add(say("All steps done."))
		ag, err := agent.New(agent.Config{MaxSteps: 400, NoProgressSteps: noProgressOff}, m.client, []agent.Tool{step})
		if err != nil {
			t.Fatal(err)
		}
		db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"))
		if err != nil {
			t.Fatal(err)
		}
		plat := &slowPlatform{recorder: &recorder{}, took: 300 * time.Millisecond}
		logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		b, err := bot.New(bot.Config{EditInterval: agent.Duration(interval)}, db, ag, []bot.Platform{plat}, bot.WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := b.Stop(context.Background()); err != nil {
				t.Errorf("stop: %v", err)
			}
			if err := db.Check(context.Background()); err != nil {
				t.Errorf("store check: %v", err)
			}
			db.Close()
		}()

		start := time.Now()
		if _, err := b.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "take many steps"}); err != nil {
			t.Fatal(err)
		}
		settleStore(t, db, interval)
		took := time.Since(start)

		calls := plat.callsTo(thread.Channel)
		for i := 1; i < len(calls); i++ {
			if gap := calls[i].at.Sub(calls[i-1].at); gap < interval {
				t.Errorf("calls %d and %d to the channel reached the platform %s apart, want %s at least", i-1, i, gap, interval)
			}
		}
		cards := plat.sent(bot.KindStatus)
		t.Logf("%d calls to the channel, %d of them for the status card, over %s", len(calls), len(cards), took)
		if len(cards) < 2 {
			t.Fatalf("%d status card calls, want the card posted and edited", len(cards))
		}
		if most := int(took/interval) + 2; len(cards) > most {
			t.Errorf("%d status card calls over %s, want at most %d: the card's states coalesced", len(cards), took, most)
		}
		if final := plat.shown(cards[0].ref.ID); final.Text != "Done" {
			t.Errorf("final card shows %q, want Done", final.Text)
		}
		if n := step.calls.Load(); n != steps {
			t.Errorf("tool ran %d times, want %d", n, steps)
		}
	})
}

// settleStore lets fake time pass, a step at a time, until no run is queued or running and
// the outbox is empty.
func settleStore(t *testing.T, db *store.DB, step time.Duration) {
	t.Helper()
	for range 1000 {
		synctest.Wait()
		var left int
		err := db.View(context.Background(), func(tx bot.Tx) error {
			items, err := tx.Outbox()
			if err != nil {
				return err
			}
			busy, err := tx.Runs(bot.RunFilter{Statuses: []agent.Status{agent.StatusQueued, agent.StatusRunning}})
			left = len(items) + len(busy)
			return err
		})
		if err != nil {
			t.Fatalf("read store: %v", err)
		}
		if left == 0 {
			return
		}
		time.Sleep(step)
	}
	t.Fatal("the runs and the outbox never settled")
}

// threadPaced is the recording platform, paced per thread as Discord and the console are.
type threadPaced struct{ *recorder }

func (threadPaced) PacedPerThread() bool { return true }

// TestPacingUnit starts runs in three threads of one channel at once. A platform paced per
// channel (Slack) gets their first posts EditInterval apart; a platform paced per thread (the
// console, Discord) gets them together, so one busy thread does not slow its siblings.
func TestPacingUnit(t *testing.T) {
	for _, perThread := range []bool{false, true} {
		t.Run(map[bool]string{false: "per channel", true: "per thread"}[perThread], func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				rec := &recorder{name: "paced"}
				var plat bot.Platform = rec
				if perThread {
					plat = threadPaced{rec}
				}
				h := newHarness(t, bot.Config{EditInterval: agent.Duration(time.Second)})
				h.others = []bot.Platform{plat}
				h.restart()
				for i := range 3 {
					h.model.add(say("done"))
					th := bot.ThreadRef{Platform: "paced", Channel: "C1", Thread: fmt.Sprintf("T%d", i)}
					h.event(bot.Event{Kind: bot.EventMention, Thread: th, User: ann, Text: "go"})
				}
				h.settle()
				first := map[string]time.Time{}
				rec.mu.Lock()
				for _, o := range rec.ops {
					if _, ok := first[o.ref.Thread.Thread]; !ok && o.kind == "post" {
						first[o.ref.Thread.Thread] = o.at
					}
				}
				rec.mu.Unlock()
				if len(first) != 3 {
					t.Fatalf("posts reached %d threads, want 3", len(first))
				}
				var lo, hi time.Time
				for _, at := range first {
					if lo.IsZero() || at.Before(lo) {
						lo = at
					}
					if at.After(hi) {
						hi = at
					}
				}
				spread := hi.Sub(lo)
				if perThread && spread != 0 {
					t.Errorf("first posts of three threads %v apart, want together", spread)
				}
				if !perThread && spread < 2*time.Second {
					t.Errorf("first posts of three threads of one channel %v apart, want at least 2s", spread)
				}
			})
		})
	}
}
