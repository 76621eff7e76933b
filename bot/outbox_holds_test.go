package bot_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// TestNewLeaderHonoursTheRetryAfterTheLastOneHeard has replica a, the outbox's leader, hit a
// rate limit on a channel asking for two minutes. a is then cut off and its leadership
// lapses: b takes the outbox over within the lease's time, and makes no call to the channel
// before the two minutes a heard of are over, since the hold is stored. Then it sends the
// channel's messages, and the hold is cleared.
func TestNewLeaderHonoursTheRetryAfterTheLastOneHeard(t *testing.T) {
	bubble(t, func(t *testing.T) {
		const retryAfter = 2 * time.Minute
		db := openStore(t)
		clk := &clock{}
		m := newModel(t)
		m.srv.SetFallback(say("Hello."))
		a := newReplica(t, "a", db, clk, m)
		time.Sleep(time.Second) // a leads; b starts after it
		b := newReplica(t, "b", db, clk, m)
		var limitedAt time.Time
		a.plat.mu.Lock()
		a.plat.fail = func(o op) error {
			if limitedAt.IsZero() {
				limitedAt = o.at
				return &bot.RateLimitError{RetryAfter: retryAfter}
			}
			return nil
		}
		a.plat.mu.Unlock()
		if _, err := a.bot.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "hi"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if limitedAt.IsZero() || len(a.plat.sent("")) != 0 {
			t.Fatalf("a made %d calls, the first limited at %v: want one call, refused", len(a.plat.ops), limitedAt)
		}
		holds, err := db.Holds(context.Background())
		if err != nil || len(holds) != 1 {
			t.Fatalf("stored holds %+v (%v), want the channel's", holds, err)
		}

		// a is cut off past its leadership; b's election comes round.
		a.store.Set(true)
		const skipped = 31 * time.Second
		clk.Advance(skipped)
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if !b.log.has("this replica leads") {
			t.Fatalf("b does not say it leads:\n%s", b.log.buf.String())
		}
		// On the clock a and b share, the hold ends retryAfter after a heard it; the test's
		// clock runs skipped ahead of the bubble's since.
		end := limitedAt.Add(retryAfter - skipped)
		time.Sleep(retryAfter)
		synctest.Wait()
		calls := b.plat.callsTo(thread.Channel)
		if len(calls) == 0 {
			t.Fatal("b never called the channel after the hold")
		}
		if calls[0].at.Before(end) {
			t.Errorf("b called the channel %s before the hold a stored ended", end.Sub(calls[0].at))
		}
		if !b.log.has("channel held by the last leader") {
			t.Errorf("b's log does not say it honours the hold:\n%s", b.log.buf.String())
		}
		if answers := b.plat.sent(bot.KindAnswer); len(answers) != 1 {
			t.Errorf("b posted %d answers, want 1", len(answers))
		}
		if holds, err := db.Holds(context.Background()); err != nil || len(holds) != 0 {
			t.Errorf("stored holds %+v (%v) after the channel was called again, want none", holds, err)
		}
	})
}

// TestNewLeaderSaysAPostMayRepeat has replica a, the outbox's leader, make the answer's post
// and never hear back, as if killed before it could record that the answer went out. The
// item was marked as being sent before the call. b takes the outbox over, posts the answer
// again, since it may never have reached the thread, and says on it that it may repeat one.
func TestNewLeaderSaysAPostMayRepeat(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		clk := &clock{}
		m := newModel(t)
		m.srv.SetFallback(say("Hello."))
		a := newReplica(t, "a", db, clk, m)
		time.Sleep(time.Second) // a leads; b starts after it
		b := newReplica(t, "b", db, clk, m)
		release := make(chan struct{})
		defer close(release)
		a.plat.mu.Lock()
		a.plat.fail = func(o op) error {
			if o.msg.Kind == bot.KindAnswer {
				<-release
			}
			return nil
		}
		a.plat.mu.Unlock()
		if _, err := a.bot.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "hi"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		var marked *bot.Sending
		if err := db.View(context.Background(), func(tx bot.Tx) error {
			items, err := tx.Outbox()
			for _, it := range items {
				if it.Kind == bot.OutboxAnswer {
					marked = it.Sending
				}
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if marked == nil || marked.Owner != "a" {
			t.Fatalf("the answer's item is marked %+v while a posts it, want marked by a", marked)
		}

		a.store.Set(true)
		clk.Advance(31 * time.Second)
		time.Sleep(11 * time.Second)
		synctest.Wait()
		answers := b.plat.sent(bot.KindAnswer)
		if len(answers) != 1 {
			t.Fatalf("b posted %d answers, want the one a may not have posted", len(answers))
		}
		if !strings.Contains(answers[0].msg.Footer, "may repeat") {
			t.Errorf("b's answer says %q in its footer, want that it may repeat one", answers[0].msg.Footer)
		}
		if !b.log.has("posting it again") {
			t.Errorf("b's log does not say it posts a marked item again:\n%s", b.log.buf.String())
		}
	})
}
