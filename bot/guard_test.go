package bot_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// approvalButtons returns the Approve and Reject buttons of every approval card the thread
// was shown, by tool, as the cards show them now.
func (h *harness) approvalButtons() map[string][2]bot.Button {
	h.t.Helper()
	out := map[string][2]bot.Button{}
	for _, o := range h.plat.sent(bot.KindApproval) {
		if o.kind != "post" {
			continue
		}
		m := h.plat.shown(o.ref.ID)
		tool := strings.TrimSuffix(strings.TrimPrefix(m.Title, "Approve "), "?")
		var pair [2]bot.Button
		for _, b := range m.Buttons {
			switch b.Label {
			case "Approve once":
				pair[0] = b
			case "Reject":
				pair[1] = b
			}
		}
		if pair[0].ID == "" || pair[1].ID == "" {
			h.t.Fatalf("approval card for %s has buttons %+v, want Approve once and Reject", tool, m.Buttons)
		}
		out[tool] = pair
	}
	return out
}

// A person approves exactly the call the card showed: once the run's call no longer has
// the arguments the approval bound (a state changed under the card), the click changes
// nothing and the call does not run.
func TestApprovalOfChangedArgumentsIsRefused(t *testing.T) {
	for _, button := range []string{"approve", "reject"} {
		t.Run(button, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
				h := newHarness(t, bot.Config{}, op)
				h.model.add(use("op", `{"q":"list"}`), say("finished"))
				res := h.mention(ann, "do the op")
				h.settle()
				approve, reject := h.buttons()
				ap := h.approvals(res.RunID)[0]

				// The call now has other arguments than the ones the card asks about.
				err := h.db.Update(context.Background(), func(tx bot.Tx) error {
					rec, err := tx.Run(res.RunID)
					if err != nil {
						return err
					}
					c := rec.State.Call(ap.CallID)
					c.Arguments = `{"q":"delete everything"}`
					c.ArgsHash = agent.HashArgs(c.Name, c.Arguments)
					return tx.PutRun(rec)
				})
				if err != nil {
					t.Fatalf("change the call's arguments: %v", err)
				}
				id := map[string]string{"approve": approve.ID, "reject": reject.ID}[button]
				if got := h.click(ann, id); got.Notice != "This run is not waiting for that any more." {
					t.Errorf("%s of changed arguments: notice %q", button, got.Notice)
				}
				h.settle()
				if n := op.calls.Load(); n != 0 {
					t.Errorf("the tool ran %d times with arguments nobody approved", n)
				}
				h.wantStatus(res.RunID, agent.StatusAwaitingApproval)
				if aps := h.approvals(res.RunID); aps[0].Status != bot.ApprovalPending {
					t.Errorf("approval is %s, want still pending", aps[0].Status)
				}
			})
		})
	}
}

// A step with several calls that need approval gets one approval per call, each click
// settles its own call whatever the order of the clicks, and the run goes on only once all
// of them are decided, running the approved calls in the order the model made them.
func TestSeveralApprovalsInOneRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		first := &tool{name: "first", risk: agent.RiskConfirm, out: "first done"}
		second := &tool{name: "second", risk: agent.RiskConfirm, out: "second done"}
		third := &tool{name: "third", risk: agent.RiskConfirm, out: "third done"}
		h := newHarness(t, bot.Config{}, first, second, third)
		h.model.add(llmtest.ToolCalls(
			llmtest.Call("first", `{"q":"1"}`),
			llmtest.Call("second", `{"q":"2"}`),
			llmtest.Call("third", `{"q":"3"}`),
		), say("finished"))
		res := h.mention(ann, "do three things")
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingApproval)
		aps := h.approvals(res.RunID)
		if len(aps) != 3 {
			t.Fatalf("%d approvals, want one per call", len(aps))
		}
		buttons := h.approvalButtons()
		if len(buttons) != 3 {
			t.Fatalf("approval cards for %d tools, want 3", len(buttons))
		}

		// The last card first: it must approve the third call, not the first pending one.
		if got := h.click(ann, buttons["third"][0].ID); got.Notice != "" {
			t.Fatalf("approve third: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingApproval)
		if got := h.click(ann, buttons["first"][1].ID); got.Notice != "" {
			t.Fatalf("reject first: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingApproval)
		if n := first.calls.Load() + second.calls.Load() + third.calls.Load(); n != 0 {
			t.Fatalf("%d calls ran before every call was decided", n)
		}
		if got := h.click(ann, buttons["second"][0].ID); got.Notice != "" {
			t.Fatalf("approve second: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)

		want := map[*tool]int32{first: 0, second: 1, third: 1}
		for tl, n := range want {
			if got := tl.calls.Load(); got != n {
				t.Errorf("%s ran %d times, want %d", tl.name, got, n)
			}
		}
		aps = h.approvals(res.RunID)
		if len(aps) != 3 {
			t.Errorf("%d approvals after the decisions, want still one per call", len(aps))
		}
		status := map[string]bot.ApprovalStatus{}
		for _, ap := range aps {
			status[ap.Tool] = ap.Status
		}
		if status["first"] != bot.ApprovalRejected || status["second"] != bot.ApprovalApproved || status["third"] != bot.ApprovalApproved {
			t.Errorf("approvals = %v, want first rejected, second and third approved", status)
		}
		// The results reach the model in the order of the calls.
		reqs := h.model.requests()
		var results []string
		for _, m := range reqs[len(reqs)-1].Messages {
			if m.Role == string(agent.RoleTool) {
				results = append(results, m.Content)
			}
		}
		if len(results) != 3 || !strings.Contains(results[0], "rejected") || !strings.Contains(results[1], "second done") || !strings.Contains(results[2], "third done") {
			t.Errorf("tool results the model saw = %q, want first rejected, then second and third done", results)
		}
	})
}

// A click counts only in the thread its button was drawn in: the same button ID sent from
// another thread, channel or platform changes nothing.
func TestClickFromAnotherThreadIsRefused(t *testing.T) {
	elsewhere := []struct {
		name string
		from bot.ThreadRef
	}{
		{"other thread", bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T2"}},
		{"other channel", bot.ThreadRef{Platform: "test", Channel: "C2", Thread: "T1"}},
		{"other platform", bot.ThreadRef{Platform: "other", Channel: "C1", Thread: "T1"}},
	}
	for _, button := range []string{"approve", "reject", "cancel"} {
		for _, e := range elsewhere {
			t.Run(button+"/"+e.name, func(t *testing.T) {
				bubble(t, func(t *testing.T) {
					op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
					h := newHarness(t, bot.Config{}, op)
					h.others = []bot.Platform{&recorder{name: "other"}}
					h.restart()
					h.model.add(use("op", `{}`), say("finished"))
					res := h.mention(ann, "do the op")
					h.settle()
					approve, reject := h.buttons()
					id := map[string]string{"approve": approve.ID, "reject": reject.ID, "cancel": labelled(t, h.card("C1").Buttons, "Cancel").ID}[button]

					got := h.event(bot.Event{Kind: bot.EventAction, Thread: e.from, User: ann, ActionID: id})
					if got.Notice != "This button belongs to another thread." {
						t.Errorf("click from %s: notice %q", e.name, got.Notice)
					}
					h.settle()
					h.wantStatus(res.RunID, agent.StatusAwaitingApproval)
					if aps := h.approvals(res.RunID); aps[0].Status != bot.ApprovalPending {
						t.Errorf("approval is %s after a click from %s", aps[0].Status, e.name)
					}
					if n := op.calls.Load(); n != 0 {
						t.Errorf("the tool ran %d times", n)
					}

					// The same click in the button's own thread works.
					if got := h.click(ann, id); got.Notice != "" {
						t.Errorf("click in the button's thread: notice %q", got.Notice)
					}
					h.settle()
					want := map[string]agent.Status{"approve": agent.StatusCompleted, "reject": agent.StatusCompleted, "cancel": agent.StatusCancelled}[button]
					h.wantStatus(res.RunID, want)
				})
			})
		}
	}
}

// Discord sometimes leaves out the channel of a button's thread; its adapter then lets the
// thread stand for the channel, and such a click still counts in its own thread.
func TestClickWhoseThreadStandsForItsChannel(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
		h := newHarness(t, bot.Config{}, op)
		h.model.add(use("op", `{}`), say("finished"))
		res := h.mention(ann, "do the op")
		h.settle()
		approve, _ := h.buttons()
		from := bot.ThreadRef{Platform: "test", Channel: "T1", Thread: "T1"}
		if got := h.event(bot.Event{Kind: bot.EventAction, Thread: from, User: ann, ActionID: approve.ID}); got.Notice != "" {
			t.Errorf("click: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		if op.calls.Load() != 1 {
			t.Errorf("the approved tool ran %d times", op.calls.Load())
		}
	})
}

// The Continue button of a paused run counts only in the run's thread too.
func TestContinueFromAnotherThreadIsRefused(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, res, cont, _ := stuckRun(t)
		other := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T2"}
		if got := h.event(bot.Event{Kind: bot.EventAction, Thread: other, User: ann, ActionID: cont.ID}); got.Notice != "This button belongs to another thread." {
			t.Errorf("continue from another thread: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingInput)
		if got := h.click(ann, cont.ID); got.Notice != "" {
			t.Errorf("continue: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
	})
}

// With approve_by = "channel", anyone allowed to use the bot may decide, but only from the
// approval's own channel: the channel is what the policy trusts, so a click from elsewhere is
// refused even for a user the policy would accept.
func TestApproveByChannelChecksTheChannel(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
		h := newHarness(t, bot.Config{Policy: bot.Policy{ApproveBy: bot.ApproveByChannel}}, op)
		h.model.add(use("op", `{}`), say("finished"))
		res := h.mention(ann, "do the op")
		h.settle()
		approve, _ := h.buttons()
		from := bot.ThreadRef{Platform: "test", Channel: "C9", Thread: "T1"}
		if got := h.event(bot.Event{Kind: bot.EventAction, Thread: from, User: bob, ActionID: approve.ID}); got.Notice == "" {
			t.Fatal("bob approved from another channel")
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingApproval)
		if got := h.click(bob, approve.ID); got.Notice != "" {
			t.Fatalf("bob in the approval's channel: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		if aps := h.approvals(res.RunID); aps[0].DecidedBy.ID != bob.ID {
			t.Errorf("decided by %+v, want bob", aps[0].DecidedBy)
		}
	})
}

// A goal or reply longer than max_goal_bytes is refused with a notice before anything is
// stored: no run, no queue entry, no claim (a retry gets the same answer).
func TestOversizedGoalRefused(t *testing.T) {
	for _, kind := range []bot.EventKind{bot.EventMention, bot.EventReply} {
		t.Run(string(kind), func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				h := newHarness(t, bot.Config{MaxGoalBytes: 1024})
				huge := strings.Repeat("x", 20<<10)
				for range 2 {
					res := h.event(bot.Event{Kind: kind, User: ann, Text: huge, Direct: true})
					if res.RunID != "" || !strings.Contains(res.Notice, "up to 1 KB") || !strings.Contains(res.Notice, "20 KB") {
						t.Fatalf("oversized %s: %+v", kind, res)
					}
				}
				h.settle()
				var runs []*bot.RunRecord
				if err := h.db.View(context.Background(), func(tx bot.Tx) error {
					var err error
					runs, err = tx.Runs(bot.RunFilter{})
					return err
				}); err != nil || len(runs) != 0 {
					t.Fatalf("%d runs stored for an oversized goal (%v)", len(runs), err)
				}
				// A goal within the limit still starts a run.
				h.model.add(say("done"))
				if res := h.mention(ann, strings.Repeat("y", 1024)); res.RunID == "" {
					t.Fatalf("a goal at the limit: %+v", res)
				}
			})
		})
	}
}

// A reply while the thread's run works is said to the run: the person is told it was noted,
// the model's next request carries it, no second run starts, and the note is dropped from the
// thread once the run has taken it.
func TestReplySteersAWorkingRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, res := workingRun(t, "Used staging as asked.")
		got := h.event(bot.Event{Kind: bot.EventReply, User: ann, Text: "use the staging database instead"})
		if got.RunID != res.RunID || !strings.Contains(got.Notice, "Noted") {
			t.Fatalf("reply mid-run = %+v, want it noted for run %s", got, res.RunID)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		if !h.model.saw(agent.RoleUser, "While you work, ann says: use the staging database instead") {
			t.Error("the model never saw the person's note")
		}
		var runs []*bot.RunRecord
		var conv *bot.Conversation
		if err := h.db.View(context.Background(), func(tx bot.Tx) error {
			var err error
			if runs, err = tx.Runs(bot.RunFilter{}); err != nil {
				return err
			}
			conv, err = tx.Conversation(thread)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 || len(conv.Queue) != 0 || len(conv.Notes) != 0 {
			t.Errorf("%d runs, %d queued goals, %d notes left; want 1, 0, 0", len(runs), len(conv.Queue), len(conv.Notes))
		}
	})
}

// A refused clicker is told who may decide, so they know whom to ask.
func TestRefusedClickerIsToldWhoDecides(t *testing.T) {
	tests := []struct {
		policy bot.Policy
		want   string
	}{
		{bot.Policy{}, "Only ann, who started the run, can."},
		{bot.Policy{Approvers: []string{boss.ID}}, "Only ann, who started the run, or one of loopbot's approvers can."},
		{bot.Policy{ApproveBy: bot.ApproveByApprovers, Approvers: []string{boss.ID}}, "Only loopbot's approvers can."},
	}
	for _, tt := range tests {
		bubble(t, func(t *testing.T) {
			op := &tool{name: "op", risk: agent.RiskConfirm, out: "done"}
			h := newHarness(t, bot.Config{Policy: tt.policy}, op)
			h.model.add(use("op", `{}`), say("finished"))
			h.mention(ann, "do the op")
			h.settle()
			approve, _ := h.buttons()
			if got := h.click(eve, approve.ID); !strings.HasSuffix(got.Notice, tt.want) {
				t.Errorf("policy %+v: notice %q, want it to end %q", tt.policy, got.Notice, tt.want)
			}
		})
	}
}

// workingRun starts a run whose one tool call takes ten (fake) seconds, and returns when the
// run is in that call; its answer after the call is answer. Call it inside a bubble.
func workingRun(t *testing.T, answer string) (*harness, bot.Result) {
	t.Helper()
	slow := &tool{name: "slow", risk: agent.RiskSafe, out: "half done", delay: 10 * time.Second}
	h := newHarness(t, bot.Config{}, slow)
	h.model.add(use("slow", `{"q":"a"}`), say(answer))
	res := h.mention(ann, "migrate the database")
	synctest.Wait()
	return h, res
}
