package bot_test

import (
	"context"
	"maps"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// feedback returns the stored ratings of a run's answer.
func (h *harness) feedback(runID string) map[string]bot.FeedbackValue {
	h.t.Helper()
	out := map[string]bot.FeedbackValue{}
	err := h.db.View(context.Background(), func(tx bot.Tx) error {
		fs, err := tx.Feedback(runID)
		for _, f := range fs {
			out[f.User.ID] = f.Value
		}
		return err
	})
	if err != nil {
		h.t.Fatalf("load feedback of %s: %v", runID, err)
	}
	return out
}

// TestAnswerFeedback rates an answer through its buttons: one rating per person, a second
// click changes it, the same click again changes nothing, and a click from another thread,
// by someone not allowed to use the bot, or on a forged ID stores nothing.
func TestAnswerFeedback(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{Policy: bot.Policy{AllowedUsers: []string{ann.ID, bob.ID}}})
		h.model.add(say("The answer is 42."))
		res := h.mention(ann, "what is the answer?")
		h.settle()
		answers := h.plat.sent(bot.KindAnswer)
		if len(answers) != 1 {
			t.Fatalf("answers posted: %d, want 1", len(answers))
		}
		btns := answers[0].msg.Buttons
		if len(btns) != 2 || btns[0].Feedback != bot.FeedbackUp || btns[1].Feedback != bot.FeedbackDown || btns[0].ID == btns[1].ID {
			t.Fatalf("answer buttons = %+v, want a distinct up and down", btns)
		}
		up, down := btns[0].ID, btns[1].ID

		steps := []struct {
			who    bot.User
			id     string
			from   bot.ThreadRef
			notice string
			want   map[string]bot.FeedbackValue
		}{
			{ann, up, thread, "Thanks: you rated this answer helpful.", map[string]bot.FeedbackValue{"U1": "up"}},
			{ann, up, thread, "You already rated this answer helpful.", map[string]bot.FeedbackValue{"U1": "up"}},
			{bob, down, thread, "Thanks: you rated this answer not helpful.", map[string]bot.FeedbackValue{"U1": "up", "U2": "down"}},
			{ann, down, thread, "You changed your rating of this answer to not helpful.", map[string]bot.FeedbackValue{"U1": "down", "U2": "down"}},
			{eve, up, thread, "Only people allowed to use loopbot here can rate its answers.", map[string]bot.FeedbackValue{"U1": "down", "U2": "down"}},
			{bob, up, bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T2"}, "This button belongs to another thread.", map[string]bot.FeedbackValue{"U1": "down", "U2": "down"}},
			{bob, up + "x", thread, "This button is no longer valid.", map[string]bot.FeedbackValue{"U1": "down", "U2": "down"}},
		}
		for i, s := range steps {
			got := h.event(bot.Event{Kind: bot.EventAction, User: s.who, ActionID: s.id, Thread: s.from})
			if got.Notice != s.notice {
				t.Errorf("click %d by %s: notice %q, want %q", i, s.who.Name, got.Notice, s.notice)
			}
			if got := h.feedback(res.RunID); !maps.Equal(got, s.want) {
				t.Errorf("click %d by %s: ratings %v, want %v", i, s.who.Name, got, s.want)
			}
		}
		// An action stored with no rating (only a bug could store one) rates nothing.
		err := h.db.Update(context.Background(), func(tx bot.Tx) error {
			return tx.PutAction(&bot.Action{ID: "odd", Kind: bot.ActionFeedback, RunID: res.RunID, Feedback: "meh"})
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := h.click(bob, "odd"); got.Notice != "This button is no longer valid." || h.feedback(res.RunID)["U2"] != bot.FeedbackDown {
			t.Errorf("click on an action without a rating: notice %q, ratings %v", got.Notice, h.feedback(res.RunID))
		}
		h.settle()
		var rated int
		err = h.db.View(context.Background(), func(tx bot.Tx) error {
			entries, err := tx.Audit(res.RunID)
			for _, e := range entries {
				if e.Action == "feedback" {
					rated++
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if rated != 3 {
			t.Errorf("audit has %d ratings, want 3 (the repeated click changed nothing)", rated)
		}
	})
}
