package bot_test

import (
	"context"
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

func TestFollowUpSeesEarlierAnswer(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{})
		h.model.add(say("The capital of France is Paris."), say("Paris has about two million people."))
		first := h.mention(ann, "what is the capital of France?")
		h.settle()
		res := h.event(bot.Event{Kind: bot.EventReply, User: bob, Text: "how many people live there?"})
		if res.RunID == "" || res.RunID == first.RunID {
			t.Fatalf("reply result = %+v, want a new follow-up run", res)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)

		reqs := h.model.requests()
		if len(reqs) != 2 {
			t.Fatalf("model got %d requests, want 2", len(reqs))
		}
		var roles []string
		for _, m := range reqs[1].Messages[1:] {
			roles = append(roles, string(m.Role)+": "+m.Content)
		}
		want := []string{"user: what is the capital of France?", "assistant: The capital of France is Paris.", "user: how many people live there?"}
		if strings.Join(roles, "\n") != strings.Join(want, "\n") {
			t.Errorf("follow-up prompt after the system message =\n%s\nwant\n%s", strings.Join(roles, "\n"), strings.Join(want, "\n"))
		}
		if n := len(h.plat.sent(bot.KindAnswer)); n != 2 {
			t.Errorf("%d answers posted, want 2", n)
		}
	})
}

func TestDuplicateDeliveryStartsOneRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{})
		h.model.add(say("done"), say("done again"))
		ev := bot.Event{ID: "Ev123", Kind: bot.EventMention, User: ann, Text: "do it"}
		first := h.event(ev)
		again := h.event(ev)
		if first.Duplicate || first.RunID == "" {
			t.Fatalf("first delivery = %+v, want a run", first)
		}
		if !again.Duplicate || again.RunID != "" {
			t.Fatalf("second delivery = %+v, want a duplicate that starts nothing", again)
		}
		h.settle()
		if n := len(h.model.requests()); n != 1 {
			t.Errorf("model consulted %d times, want 1", n)
		}
		if n := len(h.plat.sent(bot.KindStatus)); n == 0 || h.plat.sent(bot.KindStatus)[0].kind != "post" {
			t.Errorf("no status card was posted")
		}
		var runs []*bot.RunRecord
		h.db.View(t.Context(), func(tx bot.Tx) error {
			var err error
			runs, err = tx.Runs(bot.RunFilter{})
			return err
		})
		if len(runs) != 1 {
			t.Errorf("%d runs stored, want 1", len(runs))
		}
	})
}

func TestApprovalSurvivesRestart(t *testing.T) {
	bubble(t, func(t *testing.T) {
		deploy := &tool{name: "deploy", risk: agent.RiskConfirm, out: "deployed"}
		h := newHarness(t, bot.Config{}, deploy)
		h.model.add(use("deploy", `{"q":"prod"}`), say("Deployed to prod."))
		res := h.mention(ann, "deploy to prod")
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingApproval)
		approve, reject := h.buttons()
		if approve.Label != "Approve once" || approve.Style != bot.StylePrimary || reject.Style != bot.StyleDanger {
			t.Errorf("buttons = %+v, %+v", approve, reject)
		}
		card := h.plat.sent(bot.KindApproval)[0]
		if !strings.Contains(card.msg.Fields[0].Value, `"q": "prod"`) || !card.msg.Fields[0].Code {
			t.Errorf("arguments field = %+v, want the pretty-printed arguments as code", card.msg.Fields[0])
		}

		h.restart()
		h.settle()
		if deploy.calls.Load() != 0 {
			t.Fatal("the tool ran before anyone approved it")
		}
		if got := h.click(ann, approve.ID); got.Notice != "" {
			t.Fatalf("approve after restart: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		if n := deploy.calls.Load(); n != 1 {
			t.Errorf("tool ran %d times, want exactly once", n)
		}
		shown := h.plat.shown(card.ref.ID)
		if !strings.HasPrefix(shown.Text, "Approved by ann at ") || len(shown.Buttons) != 0 {
			t.Errorf("approval card after the decision = %+v, want approved by ann and no buttons", shown)
		}
		// One post; after it only edits: the restart re-sends the pending card (so a platform
		// that lost its view gets it back) and the decision edits it again.
		ops := h.plat.sent(bot.KindApproval)
		if len(ops) != 3 || ops[0].kind != "post" || ops[1].kind != "update" || ops[2].kind != "update" {
			t.Errorf("approval card ops = %+v, want a post, the restart's refresh and the decision's edit", ops)
		}
		var audit []bot.AuditEntry
		h.db.View(t.Context(), func(tx bot.Tx) error {
			var err error
			audit, err = tx.Audit(res.RunID)
			return err
		})
		if len(audit) != 1 || audit[0].Actor.ID != ann.ID || audit[0].Action != "approve" || audit[0].ArgsHash != agent.HashArgs("deploy", `{"q":"prod"}`) {
			t.Errorf("audit = %+v, want ann's approval with the arguments' hash", audit)
		}
		// The same button once more, after the run is over.
		if got := h.click(ann, approve.ID); !strings.HasPrefix(got.Notice, "Already approved by ann") {
			t.Errorf("late second click notice = %q", got.Notice)
		}
		if n := deploy.calls.Load(); n != 1 {
			t.Errorf("tool ran %d times after a second click, want 1", n)
		}
	})
}

// A reply in a thread the bot has no conversation in is someone else's talk: it starts
// nothing and gets no notice, even when too long. In a direct conversation, where every
// message is for the bot, the same reply starts a run.
func TestReplyOnlyInOwnThreads(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{MaxGoalBytes: 64})
		stranger := bot.ThreadRef{Platform: thread.Platform, Workspace: thread.Workspace, Channel: thread.Channel, Thread: "1700000000.999999"}
		for _, text := range []string{"can someone review my PR?", strings.Repeat("x", 100)} {
			if res := h.event(bot.Event{Kind: bot.EventReply, Thread: stranger, User: bob, Text: text}); res != (bot.Result{}) {
				t.Fatalf("reply in a stranger's thread = %+v, want nothing", res)
			}
		}
		h.settle()
		if err := h.db.View(context.Background(), func(tx bot.Tx) error {
			runs, err := tx.Runs(bot.RunFilter{})
			if err == nil && len(runs) != 0 {
				t.Errorf("%d runs after a stranger's reply, want 0", len(runs))
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		h.plat.mu.Lock()
		n := len(h.plat.ops)
		h.plat.mu.Unlock()
		if n != 0 {
			t.Errorf("%d platform calls after a stranger's reply, want 0", n)
		}
		h.model.add(say("hello"))
		if res := h.event(bot.Event{Kind: bot.EventReply, Thread: stranger, User: bob, Text: "hi", Direct: true}); res.RunID == "" {
			t.Fatalf("direct reply = %+v, want a run", res)
		}
		h.settle()
	})
}
