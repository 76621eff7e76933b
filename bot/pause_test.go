package bot_test

import (
	"testing"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// statusButton returns the button labelled label on the status card of run id as the thread
// shows it now, if it has one.
func (h *harness) statusButton(label string) (bot.Button, bool) {
	h.t.Helper()
	cards := h.plat.sent(bot.KindStatus)
	if len(cards) == 0 {
		h.t.Fatal("no status card was posted")
	}
	for _, b := range h.plat.shown(cards[len(cards)-1].ref.ID).Buttons {
		if b.Label == label {
			return b, true
		}
	}
	return bot.Button{}, false
}

// Pause stops a working run at its next step boundary; the card then offers Resume, which
// works after a restart on the same store; who may pause is who may cancel.
func TestPauseAndResumeAcrossARestart(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, res := workingRun(t, "migrated")
		pause, ok := h.statusButton("Pause")
		if !ok {
			t.Fatal("the working run's card has no Pause button")
		}
		if got := h.click(eve, pause.ID); got.Notice != "Only the person who started this run or an approver can do that." {
			t.Fatalf("a stranger's pause: notice %q", got.Notice)
		}
		if got := h.click(ann, pause.ID); got.Notice != "Pausing at the next step." {
			t.Fatalf("pause: notice %q", got.Notice)
		}
		if got := h.click(ann, pause.ID); got.Notice != "Pausing at the next step." {
			t.Fatalf("a second pause request: notice %q", got.Notice)
		}
		if got := h.auditActions(res.RunID); len(got) != 1 {
			t.Fatalf("audit %v after two pause requests, want one", got)
		}
		h.settle()
		if got := h.click(ann, pause.ID); got.Notice != "This run is already paused or waiting for a reply." {
			t.Fatalf("pause of a paused run: notice %q", got.Notice)
		}
		h.wantStatus(res.RunID, agent.StatusAwaitingInput)
		rec := h.run(res.RunID)
		if rec.State.Pause.Kind != agent.PausePerson || rec.PauseBy != "" {
			t.Fatalf("paused as %+v, request left %q", rec.State.Pause, rec.PauseBy)
		}
		if c := rec.State.Calls[0]; c.Status != agent.CallSucceeded {
			t.Fatalf("the call in flight when Pause was pressed: %s", c.Status)
		}
		if n := len(h.model.requests()); n != 1 {
			t.Fatalf("%d model requests, want 1: the run went on past the boundary", n)
		}
		if _, ok := h.statusButton("Pause"); ok {
			t.Error("the paused run's card still offers Pause")
		}

		h.restart()
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingInput)
		resume, ok := h.statusButton("Resume")
		if !ok {
			t.Fatal("the paused run's card has no Resume button after the restart")
		}
		if got := h.click(eve, resume.ID); got.Notice == "" {
			t.Fatal("a stranger resumed the run")
		}
		if got := h.click(ann, resume.ID); got.Notice != "" {
			t.Fatalf("resume: notice %q", got.Notice)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		if got := h.auditActions(res.RunID); len(got) < 2 || got[0] != "pause" || got[1] != "continue" {
			t.Errorf("audit %v, want the pause and the resume", got)
		}
	})
}

// labelled returns the button labelled label among bs.
func labelled(t *testing.T, bs []bot.Button, label string) bot.Button {
	t.Helper()
	for _, b := range bs {
		if b.Label == label {
			return b
		}
	}
	t.Fatalf("no %q button among %+v", label, bs)
	return bot.Button{}
}
