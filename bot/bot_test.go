package bot_test

import (
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

func TestMentionToAnswer(t *testing.T) {
	bubble(t, func(t *testing.T) {
		look := &tool{name: "look", risk: agent.RiskSafe, out: "42 files", delay: 3 * time.Second}
		h := newHarness(t, bot.Config{}, look)
		h.model.add(
			use("update_plan", `{"plan":[{"step":"count files","status":"in_progress"}]}`),
			use("look", `{"q":"files"}`),
			say("There are 42 files."),
		)
		res := h.mention(ann, "count the files")
		if res.RunID == "" || res.Notice != "" {
			t.Fatalf("result = %+v, want a run and no notice", res)
		}
		h.settle()

		h.wantStatus(res.RunID, agent.StatusCompleted)
		cards := h.plat.sent(bot.KindStatus)
		var posts, edits int
		for _, o := range cards {
			if o.kind == "post" {
				posts++
			} else {
				edits++
			}
			if o.ref.ID != cards[0].ref.ID {
				t.Errorf("status card op on %s, want every one on the first card %s", o.ref.ID, cards[0].ref.ID)
			}
		}
		if posts != 1 || edits == 0 {
			t.Errorf("status card posted %d times and edited %d times, want posted once and edited", posts, edits)
		}
		card := h.plat.shown(cards[0].ref.ID)
		if card.Title != "count the files" || card.Text != "Done" || len(card.Buttons) != 0 {
			t.Errorf("final card = %+v, want the goal, Done and no buttons", card)
		}
		if len(card.Plan) != 1 || card.Plan[0].Text != "count files" || !strings.Contains(card.Footer, "Step 3") {
			t.Errorf("final card plan %+v footer %q, want the plan and step 3", card.Plan, card.Footer)
		}
		answers := h.plat.sent(bot.KindAnswer)
		if len(answers) != 1 || answers[0].msg.Text != "There are 42 files." || answers[0].ref.Thread != thread {
			t.Fatalf("answers = %+v, want one answer in the thread", answers)
		}
		if look.calls.Load() != 1 {
			t.Errorf("tool ran %d times, want 1", look.calls.Load())
		}
	})
}
