package bot_test

import (
	"context"
	"slices"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// TestAcceptedEventsAreHandledAfterRestart accepts events and stops before any reaches
// Handle, as a kill -9 right after the platform's acks would: the next start handles each
// once, in the order accepted, and leaves the inbox empty; a second restart and a
// redelivery start nothing more.
func TestAcceptedEventsAreHandledAfterRestart(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{})
		h.model.add(say("first done"), say("second done"))
		other := bot.ThreadRef{Platform: thread.Platform, Channel: "C1", Thread: "T2"}
		evs := []bot.Event{
			{Kind: bot.EventMention, ID: "ev-a", Thread: thread, User: ann, Text: "first"},
			{Kind: bot.EventMention, ID: "ev-b", Thread: other, User: ann, Text: "second"},
			{Kind: bot.EventMention, ID: "ev-a", Thread: thread, User: ann, Text: "first"},
		}
		added, err := h.bot.Accept(context.Background(), evs)
		if err != nil {
			t.Fatal(err)
		}
		if want := []bool{true, true, false}; !slices.Equal(added, want) {
			t.Errorf("added %v, want %v", added, want)
		}
		h.restart()
		h.settle()
		runs := h.runs()
		if len(runs) != 2 || runs[0].State.Goal != "first" || runs[1].State.Goal != "second" {
			t.Fatalf("runs after the restart = %d %+v, want one for each accepted event, in order", len(runs), goals(runs))
		}
		if n := h.inboxLen(); n != 0 {
			t.Errorf("%d events left in the inbox, want none", n)
		}
		h.restart()
		h.settle()
		if res := h.event(evs[0]); !res.Duplicate {
			t.Errorf("redelivery of a replayed event: %+v, want a duplicate", res)
		}
		if runs := h.runs(); len(runs) != 2 {
			t.Errorf("%d runs after a second restart and a redelivery, want 2", len(runs))
		}
	})
}

// TestHandleEmptiesTheInbox: an accepted event leaves the inbox when Handle takes it, both
// a goal (in its claim's transaction) and an event that takes no claim (a bot's message).
func TestHandleEmptiesTheInbox(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{})
		h.model.add(say("done"))
		evs := []bot.Event{
			{Kind: bot.EventMention, ID: "ev-goal", Thread: thread, User: ann, Text: "go"},
			{Kind: bot.EventMention, ID: "ev-bot", Thread: thread, User: bot.User{ID: "B1", Bot: true}, Text: "go"},
		}
		if _, err := h.bot.Accept(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			h.event(ev)
		}
		h.settle()
		if n := h.inboxLen(); n != 0 {
			t.Errorf("%d events left in the inbox after Handle, want none", n)
		}
		h.restart()
		h.settle()
		if runs := h.runs(); len(runs) != 1 {
			t.Errorf("%d runs, want 1: a handled event was handled again at the restart", len(runs))
		}
	})
}

func (h *harness) runs() []*bot.RunRecord {
	h.t.Helper()
	var runs []*bot.RunRecord
	err := h.db.View(context.Background(), func(tx bot.Tx) error {
		var err error
		runs, err = tx.Runs(bot.RunFilter{})
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return runs
}

func (h *harness) inboxLen() int {
	h.t.Helper()
	var n int
	err := h.db.View(context.Background(), func(tx bot.Tx) error {
		in, err := tx.Inbox()
		n = len(in)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func goals(runs []*bot.RunRecord) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.State.Goal)
	}
	return out
}
