package bot_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// TestCancelNotifiedToTheOwner cancels, through replica b, a run that replica a works on:
// b's notification reaches a, which stops its goroutine before any time passes, without
// waiting for its heartbeat.
func TestCancelNotifiedToTheOwner(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db, a, b, res := blockedOnA(t)
		start := time.Now()
		if _, err := b.bot.Handle(context.Background(), bot.Event{ID: "ev-2", Kind: bot.EventReply, Thread: thread, User: ann, Text: "stop"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("%s passed in the bubble, want none (no tick)", waited)
		}
		if !a.log.has("run ended elsewhere") {
			t.Errorf("a did not stop the run at once; its log:\n%s", a.log.buf.String())
		}
		wantCancelledAndReleased(t, db, res.RunID)
	})
}

// TestOutboxNotifiedToTheLeader: replica b, which does not lead, works on a run and writes
// its card and answer to the outbox; the leader a sends the card before any time passes
// and the answer an edit interval later, without waiting for its poll of the outbox.
func TestOutboxNotifiedToTheLeader(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		clk := &clock{}
		m := newModel(t)
		m.srv.SetFallback(say("Hello."))
		a := newReplica(t, "a", db, clk, m)
		b := newReplica(t, "b", db, clk, m)
		synctest.Wait()
		start := time.Now()
		if _, err := b.bot.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "hi"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("%s passed in the bubble, want none (no tick)", waited)
		}
		if n := len(a.plat.sent("")); n == 0 {
			t.Fatalf("the leader a made no call at once; a:\n%s\nb:\n%s", a.log.buf.String(), b.log.buf.String())
		}
		// The answer follows the run's card after an edit interval (1s), the channel's
		// pacing, still well before the leader's poll (a third of the 30s lease).
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := len(a.plat.sent(bot.KindAnswer)); n != 1 {
			t.Errorf("the leader a sent %d answers within 2s, want 1", n)
		}
		if n := len(b.plat.sent("")); n != 0 {
			t.Errorf("b made %d calls, want none (it does not lead)", n)
		}
	})
}
