package bot_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

func (h *harness) autonomy(u bot.User, level string) bot.Result {
	h.t.Helper()
	return h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandAutonomy, User: u, Text: level})
}

// lastCard is the latest status card as the thread shows it.
func (h *harness) lastCard() bot.Message {
	h.t.Helper()
	cards := h.plat.sent(bot.KindStatus)
	if len(cards) == 0 {
		h.t.Fatal("no status card was posted")
	}
	return h.plat.shown(cards[len(cards)-1].ref.ID)
}

// TestAutonomyCommandChangesWhatAsks goes through the real bot, store and loop: a cautious
// write runs unasked at the default (balanced); a non-approver cannot change the level; an
// approver sets careful, which the audit log records, the next run's write waits for approval
// with the level as the reason, the card shows the level, and the setting outlives a restart.
// A change reaches a run that waits, and shows on its card.
func TestAutonomyCommandChangesWhatAsks(t *testing.T) {
	bubble(t, func(t *testing.T) {
		w := &tool{name: "write", risk: agent.RiskCautious, out: "written"}
		h := newHarness(t, bot.Config{Policy: bot.Policy{Approvers: []string{boss.ID}}}, w)
		h.model.add(use("write", `{"q":"1"}`), say("Wrote it."))
		first := h.mention(ann, "write the file")
		h.settle()
		h.wantStatus(first.RunID, agent.StatusCompleted)
		if w.calls.Load() != 1 || len(h.approvals(first.RunID)) != 0 {
			t.Fatalf("balanced: %d writes, %d approvals; want the write to run unasked", w.calls.Load(), len(h.approvals(first.RunID)))
		}
		if f := h.lastCard().Footer; !strings.Contains(f, "balanced · momentum 1.00") {
			t.Errorf("card footer %q does not show the level and momentum", f)
		}

		if got := h.autonomy(ann, "bold"); !strings.Contains(got.Notice, "Only loopbot's approvers") {
			t.Errorf("a non-approver's change: notice %q", got.Notice)
		}
		if got := h.autonomy(boss, "reckless"); !strings.Contains(got.Notice, "not an autonomy level") {
			t.Errorf("an unknown level: notice %q", got.Notice)
		}
		if got := h.autonomy(boss, "careful"); got.Notice != "This channel's autonomy level is now careful (it was balanced)." {
			t.Errorf("the approver's change: notice %q", got.Notice)
		}
		var audit []bot.AuditEntry
		if err := h.db.View(context.Background(), func(tx bot.Tx) error {
			var err error
			audit, err = tx.Audit("")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if n := len(audit); n == 0 || audit[n-1].Action != "autonomy" || audit[n-1].Actor.ID != boss.ID ||
			!strings.Contains(audit[n-1].Detail, "balanced -> careful") {
			t.Errorf("audit log %+v, want the change by boss", audit)
		}

		h.model.add(use("write", `{"q":"2"}`), say("Wrote it again."))
		second := h.mention(ann, "write it again")
		h.settle()
		h.wantStatus(second.RunID, agent.StatusAwaitingApproval)
		if w.calls.Load() != 1 {
			t.Fatalf("careful: the write ran before anyone approved it")
		}
		if c := h.run(second.RunID).State.Calls[0]; !strings.Contains(c.RiskReason, "autonomy (careful)") {
			t.Errorf("approval reason %q does not name the level", c.RiskReason)
		}
		if f := h.lastCard().Footer; !strings.Contains(f, "careful") {
			t.Errorf("card footer %q does not show careful", f)
		}

		h.restart()
		if got := h.autonomy(ann, ""); !strings.Contains(got.Notice, "is careful (set by boss") {
			t.Errorf("the level after a restart: notice %q", got.Notice)
		}
		h.autonomy(boss, "bold")
		h.settle()
		if got := h.run(second.RunID).State.Autonomy; got != agent.LevelBold {
			t.Errorf("the waiting run works at %q, want bold", got)
		}
		if f := h.lastCard().Footer; !strings.Contains(f, "bold") {
			t.Errorf("the waiting run's card footer %q does not show bold", f)
		}
		h.wantStatus(second.RunID, agent.StatusAwaitingApproval) // a new level approves nothing
	})
}

// TestAutonomyOfOtherChannels: a level set in one channel does not reach another.
func TestAutonomyOfOtherChannels(t *testing.T) {
	bubble(t, func(t *testing.T) {
		w := &tool{name: "write", risk: agent.RiskCautious, out: "written"}
		h := newHarness(t, bot.Config{Policy: bot.Policy{Approvers: []string{boss.ID}}}, w)
		h.autonomy(boss, "careful")
		other := bot.ThreadRef{Platform: "test", Channel: "C2", Thread: "T9"}
		h.model.add(use("write", `{"q":"1"}`), say("Wrote it."))
		res := h.event(bot.Event{Kind: bot.EventMention, User: ann, Text: "write", Thread: other})
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
	})
}

// TestMomentumChecksInThroughTheBot: a run whose calls keep failing, never five in a row,
// pauses with a check-in question that says what went wrong and offers Continue and Stop;
// Continue lets it finish.
func TestMomentumChecksInThroughTheBot(t *testing.T) {
	bubble(t, func(t *testing.T) {
		op := &tool{name: "op", risk: agent.RiskSafe, out: "ok"}
		h := newHarness(t, bot.Config{}, op)
		// Unknown tools fail; op succeeds: f f s f f s f f.
		for i, name := range []string{"nope1", "nope2", "op", "nope3", "nope4", "op", "nope5", "nope6"} {
			h.model.add(use(name, fmt.Sprintf(`{"q":"%d"}`, i)))
		}
		h.model.add(say("Done despite it all."))
		res := h.mention(ann, "try things")
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingInput)
		qs := h.plat.sent(bot.KindQuestion)
		if len(qs) != 1 || len(qs[0].msg.Buttons) != 2 || !strings.Contains(qs[0].msg.Text, "Momentum is low") ||
			!strings.Contains(qs[0].msg.Text, "nope6") {
			t.Fatalf("questions %+v, want a momentum check-in with Continue and Stop", qs)
		}
		if f := h.lastCard().Footer; !strings.Contains(f, "momentum 0.25") {
			t.Errorf("card footer %q does not show the momentum", f)
		}
		h.click(ann, qs[0].msg.Buttons[0].ID)
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
	})
}

// TestAutonomyReachesAWorkingRun: a level set while a run works applies from its next step
// (through Hooks.Autonomy), though the store's copy of a working run is not touched.
func TestAutonomyReachesAWorkingRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		slow := &tool{name: "slow", risk: agent.RiskSafe, out: "slept", delay: time.Minute}
		w := &tool{name: "write", risk: agent.RiskCautious, out: "written"}
		h := newHarness(t, bot.Config{Policy: bot.Policy{Approvers: []string{boss.ID}}}, slow, w)
		h.model.add(use("slow", `{}`), use("write", `{}`), say("Done."))
		res := h.mention(ann, "sleep, then write")
		synctest.Wait() // the run sleeps in its first call
		h.wantStatus(res.RunID, agent.StatusRunning)
		h.autonomy(boss, "careful")
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingApproval)
		if w.calls.Load() != 0 {
			t.Fatal("the write ran at careful without approval")
		}
		if got := h.run(res.RunID).State.Autonomy; got != agent.LevelCareful {
			t.Errorf("the run works at %q, want careful", got)
		}
	})
}

// TestCarefulChecksInThroughTheBot: at careful, a run checks in every 10 steps with Continue
// and Stop; Stop ends it.
func TestCarefulChecksInThroughTheBot(t *testing.T) {
	bubble(t, func(t *testing.T) {
		look := &tool{name: "look", risk: agent.RiskSafe, out: "seen"}
		h := newHarness(t, bot.Config{Policy: bot.Policy{Approvers: []string{boss.ID}}}, look)
		h.autonomy(boss, "careful")
		for i := range 12 {
			h.model.add(use("look", fmt.Sprintf(`{"q":"%d"}`, i)))
		}
		h.model.add(say("Looked everywhere."))
		res := h.mention(ann, "look around")
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingInput)
		st := h.run(res.RunID).State
		if st.Pause.Kind != agent.PauseCheckIn || st.Step != 10 {
			t.Fatalf("pause %+v at step %d, want the check-in at step 10", st.Pause, st.Step)
		}
		qs := h.plat.sent(bot.KindQuestion)
		if len(qs) != 1 || len(qs[0].msg.Buttons) != 2 || !strings.Contains(qs[0].msg.Text, "every 10 steps") {
			t.Fatalf("questions %+v, want a check-in with Continue and Stop", qs)
		}
		h.click(ann, qs[0].msg.Buttons[1].ID)
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCancelled)
	})
}
