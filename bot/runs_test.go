package bot_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// card returns the status card of the thread's first run as it shows now.
func (h *harness) card(channel string) bot.Message {
	h.t.Helper()
	for _, o := range h.plat.sent(bot.KindStatus) {
		if o.ref.Thread.Channel == channel {
			return h.plat.shown(o.ref.ID)
		}
	}
	h.t.Fatalf("no status card in %s", channel)
	return bot.Message{}
}

func TestCancelButtonStopsARunningRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		wait := &tool{name: "wait", risk: agent.RiskSafe, block: true}
		h := newHarness(t, bot.Config{}, wait)
		h.model.add(use("wait", `{}`))
		res := h.mention(ann, "wait forever")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		h.wantStatus(res.RunID, agent.StatusRunning)
		buttons := h.card("C1").Buttons
		if len(buttons) != 1 || buttons[0].Label != "Cancel" {
			t.Fatalf("card buttons = %+v, want Cancel", buttons)
		}
		if got := h.click(eve, buttons[0].ID); !strings.Contains(got.Notice, "Only the person who started") {
			t.Errorf("stranger's cancel: notice %q", got.Notice)
		}
		h.wantStatus(res.RunID, agent.StatusRunning)

		if got := h.click(ann, buttons[0].ID); got.Notice != "Cancelling the run." {
			t.Errorf("cancel: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCancelled)
		if card := h.card("C1"); card.Text != "Cancelled" || len(card.Buttons) != 0 {
			t.Errorf("card after cancel = %+v", card)
		}
		failures := h.plat.sent(bot.KindFailure)
		if len(failures) != 1 || failures[0].msg.Title != "Run cancelled" {
			t.Errorf("failure messages = %+v, want one saying the run was cancelled", failures)
		}
		if got := h.click(ann, buttons[0].ID); got.Notice != "This run has already ended." {
			t.Errorf("cancel of an ended run: notice %q", got.Notice)
		}
	})
}

func TestCancelCommandClosesAPausedRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm}
		h := newHarness(t, bot.Config{}, op)
		h.model.add(use("op", `{}`))
		res := h.mention(ann, "do the op")
		h.settle()
		approve, _ := h.buttons()

		got := h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandCancel, User: ann})
		if got.Notice != "" || got.RunID != res.RunID {
			t.Errorf("cancel command result = %+v", got)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCancelled)
		if aps := h.approvals(res.RunID); aps[0].Status != bot.ApprovalCancelled {
			t.Errorf("approval of the cancelled run is %s", aps[0].Status)
		}
		if card := h.plat.shown(h.plat.sent(bot.KindApproval)[0].ref.ID); card.Text != "Closed: the run was cancelled." || len(card.Buttons) != 0 {
			t.Errorf("approval card = %+v", card)
		}
		if got := h.click(ann, approve.ID); !strings.Contains(got.Notice, "cancelled") {
			t.Errorf("approve after cancel: notice %q", got.Notice)
		}
		h.settle()
		if op.calls.Load() != 0 {
			t.Error("the tool of a cancelled run ran")
		}
		if got := h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandCancel, User: ann}); got.Notice != "Nothing is running in this thread." {
			t.Errorf("second cancel: notice %q", got.Notice)
		}
	})
}

func TestGoalQueuedBehindActiveRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskConfirm, out: "op done"}
		h := newHarness(t, bot.Config{}, op)
		h.model.add(use("op", `{}`), say("First answer."), say("Second answer."))
		first := h.mention(ann, "first goal")
		h.settle()

		second := h.mention(bob, "second goal")
		if second.RunID != "" {
			t.Fatalf("a second run %s started while the first waits for approval", second.RunID)
		}
		h.settle()
		notices := h.plat.sent(bot.KindNotice)
		if len(notices) != 1 || !strings.Contains(notices[0].msg.Text, "Queued bob's request") {
			t.Fatalf("notices = %+v, want the thread told of the queued goal", notices)
		}
		if n := len(h.model.requests()); n != 1 {
			t.Fatalf("model consulted %d times before the first run went on, want 1", n)
		}

		approve, _ := h.buttons()
		h.click(ann, approve.ID)
		h.settle()
		h.wantStatus(first.RunID, agent.StatusCompleted)
		answers := h.plat.sent(bot.KindAnswer)
		if len(answers) != 2 || answers[1].msg.Text != "Second answer." {
			t.Fatalf("answers = %+v, want both goals answered in order", answers)
		}
		if !h.model.saw(agent.RoleAssistant, "First answer.") || !h.model.saw(agent.RoleUser, "second goal") {
			t.Error("the queued run did not get the first run's answer as history")
		}
		var conv *bot.Conversation
		h.db.View(context.Background(), func(tx bot.Tx) error {
			var err error
			conv, err = tx.Conversation(thread)
			return err
		})
		if conv.Active != "" || len(conv.Queue) != 0 || len(conv.Runs) != 2 {
			t.Errorf("conversation = %+v, want two runs, none active or queued", conv)
		}
	})
}

func TestReplyAnswersQuestion(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{})
		h.model.add(use("ask_user", `{"question":"Which branch?"}`), say("Deployed main."))
		res := h.mention(ann, "deploy")
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingInput)
		qs := h.plat.sent(bot.KindQuestion)
		if len(qs) != 1 || qs[0].msg.Text != "Which branch?" || len(qs[0].msg.Buttons) != 0 {
			t.Fatalf("questions = %+v, want the model's question without buttons", qs)
		}
		got := h.event(bot.Event{Kind: bot.EventReply, User: ann, Text: "main"})
		if got.RunID != res.RunID {
			t.Errorf("reply went to run %q, want %q", got.RunID, res.RunID)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		if !h.model.saw(agent.RoleTool, "answered: main") {
			t.Error("the model did not get the answer")
		}
	})
}

func TestContinueButtonAfterStuckPause(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, res, cont, stop := stuckRun(t)
		if got := h.click(eve, cont.ID); !strings.Contains(got.Notice, "Only the person") {
			t.Errorf("stranger's continue: notice %q", got.Notice)
		}
		if got := h.click(ann, cont.ID); got.Notice != "" {
			t.Errorf("continue: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		if got := h.click(ann, stop.ID); got.Notice != "This run has already ended." {
			t.Errorf("stop after the end: notice %q", got.Notice)
		}
	})
}

func TestRunningRunResumesAfterRestart(t *testing.T) {
	bubble(t, func(t *testing.T) {
		wait := &tool{name: "wait", risk: agent.RiskSafe, block: true}
		h := newHarness(t, bot.Config{}, wait)
		h.model.add(use("wait", `{}`), say("Picked up after the restart."))
		res := h.mention(ann, "wait")
		synctest.Wait()
		h.restart()
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		if !h.model.saw(agent.RoleTool, "outcome unknown") {
			t.Error("the model was not told the interrupted call's outcome is unknown")
		}
		if n := wait.calls.Load(); n != 1 {
			t.Errorf("a call with side effects ran %d times across the restart, want 1", n)
		}
		var told []string
		for _, m := range h.plat.sent(bot.KindNotice) {
			if strings.Contains(m.msg.Text, "did not run it again") {
				told = append(told, m.msg.Text)
			}
		}
		if len(told) != 1 || !strings.Contains(told[0], "`wait`") {
			t.Errorf("notices about the interrupted call: %q, want one naming it", told)
		}
	})
}

func TestConcurrencyLimitQueuesRuns(t *testing.T) {
	bubble(t, func(t *testing.T) {
		wait := &tool{name: "wait", risk: agent.RiskSafe, block: true}
		h := newHarness(t, bot.Config{MaxConcurrentRuns: 1}, wait)
		h.model.add(use("wait", `{}`), say("Second done."))
		first := h.mention(ann, "block")
		synctest.Wait()
		other := bot.ThreadRef{Platform: "test", Channel: "C2", Thread: "T2"}
		second := h.event(bot.Event{Kind: bot.EventMention, Thread: other, User: bob, Text: "quick"})
		synctest.Wait()
		h.wantStatus(second.RunID, agent.StatusQueued)

		h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandCancel, User: ann})
		h.settle()
		h.wantStatus(first.RunID, agent.StatusCancelled)
		h.wantStatus(second.RunID, agent.StatusCompleted)
	})
}

func TestPolicyAndIgnoredEvents(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{Policy: bot.Policy{AllowedChannels: []string{"C1"}, AllowedUsers: []string{ann.ID}}})
		if got := h.mention(eve, "hello"); got.Notice != "You are not allowed to start runs here." || got.RunID != "" {
			t.Errorf("stranger's mention = %+v", got)
		}
		elsewhere := bot.ThreadRef{Platform: "test", Channel: "C9", Thread: "T9"}
		if got := h.event(bot.Event{Kind: bot.EventMention, Thread: elsewhere, User: ann, Text: "hello"}); got.RunID != "" {
			t.Errorf("mention in a channel not allowed started run %s", got.RunID)
		}
		if got := h.mention(robot, "hello"); got != (bot.Result{}) {
			t.Errorf("bot's mention = %+v, want it ignored", got)
		}
		if got := h.mention(ann, "  "); got.Notice == "" || got.RunID != "" {
			t.Errorf("empty goal = %+v, want a hint", got)
		}
		if got := h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandStatus, User: ann}); got.Notice != "No runs in this thread yet." {
			t.Errorf("status notice %q", got.Notice)
		}
		h.settle()
		if n := len(h.plat.sent("")); n != 0 {
			t.Errorf("%d messages posted for refused events", n)
		}
		if _, err := h.bot.Handle(context.Background(), bot.Event{Kind: bot.EventMention, ID: "x", User: ann}); err == nil {
			t.Error("an event without a thread was accepted")
		}
		unknown := bot.ThreadRef{Platform: "irc", Channel: "C1", Thread: "T1"}
		if _, err := h.bot.Handle(context.Background(), bot.Event{Kind: bot.EventMention, ID: "y", Thread: unknown, User: ann, Text: "hi"}); err == nil {
			t.Error("an event from a platform that is not configured was accepted")
		}

		h.model.add(say("hi"))
		res := h.mention(ann, "hello")
		h.settle()
		got := h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandStatus, User: ann})
		if got.Notice != "• hello: Done, step 1\nAutonomy here: balanced." {
			t.Errorf("status notice %q", got.Notice)
		}
		h.wantStatus(res.RunID, agent.StatusCompleted)

		stopped := h.bot
		h.close()
		if _, err := stopped.Handle(context.Background(), bot.Event{Kind: bot.EventMention, ID: "late", Thread: thread, User: ann, Text: "x"}); !errors.Is(err, bot.ErrStopped) {
			t.Errorf("Handle after Stop: %v, want ErrStopped", err)
		}
	})
}

func TestRunThatCannotBeAdvancedFails(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{})
		// A state written by a newer loopbot: the loop refuses it rather than misread it.
		err := h.db.Update(context.Background(), func(tx bot.Tx) error {
			st := agent.NewState("future", "from the future", nil, time.Now())
			st.Version = agent.StateVersion + 1
			if err := tx.PutRun(&bot.RunRecord{ID: "future", Thread: thread, Requester: ann, Status: agent.StatusQueued, State: st}); err != nil {
				return err
			}
			return tx.PutConversation(&bot.Conversation{Thread: thread, Runs: []string{"future"}, Active: "future"})
		})
		if err != nil {
			t.Fatal(err)
		}
		h.model.add(say("Queued goal answered."))
		h.mention(bob, "a goal queued behind it")
		h.settle()

		h.wantStatus("future", agent.StatusFailed)
		failures := h.plat.sent(bot.KindFailure)
		if len(failures) != 1 || !strings.Contains(failures[0].msg.Text, "internal error") {
			t.Errorf("failure messages = %+v, want one about an internal error", failures)
		}
		if answers := h.plat.sent(bot.KindAnswer); len(answers) != 1 {
			t.Errorf("the goal queued behind the failed run got %d answers, want 1", len(answers))
		}
	})
}

// stuckRun starts a run that repeats one call until the loop pauses it as stuck, and returns
// it with the Continue and Stop buttons of its question. Call it inside a bubble.
func stuckRun(t *testing.T) (h *harness, res bot.Result, cont, stop bot.Button) {
	t.Helper()
	look := &tool{name: "look", risk: agent.RiskSafe, out: "same"}
	h = newHarness(t, bot.Config{}, look)
	h.model.add(use("look", `{"q":"a"}`), use("look", `{"q":"a"}`), use("look", `{"q":"a"}`), say("Found it."))
	res = h.mention(ann, "look around")
	h.settle()
	h.wantStatus(res.RunID, agent.StatusAwaitingInput)
	qs := h.plat.sent(bot.KindQuestion)
	if len(qs) != 1 || len(qs[0].msg.Buttons) != 2 {
		t.Fatalf("questions = %+v, want one with Continue and Stop", qs)
	}
	return h, res, qs[0].msg.Buttons[0], qs[0].msg.Buttons[1]
}
