package bot

import (
	"context"

	"github.com/loopbot/loopbot/agent"
)

// Pause and Resume. The status card of a run that is not over has a Pause button beside
// Cancel; a press keeps who asked in the run's record (RunRecord.PauseBy), and the loop,
// which asks for it at every step boundary (boundary.hold, agent.Hooks.Hold),
// pauses the run there as agent.PausePerson. The paused run's card shows Resume instead,
// which is the paused run's Continue action. Who may pause and resume is who may cancel
// (Policy.mayControl). A pause is a stored state, so it outlives a restart, and so does a
// request the loop has not taken yet.

// Notices of Pause.
const (
	noticePausing      = "Pausing at the next step."
	noticeAlreadyPause = "This run is already paused or waiting for a reply."
)

// pauseRun asks run act.RunID to pause at its next step boundary, for who in thread from.
func (b *Bot) pauseRun(ctx context.Context, who User, from ThreadRef, runID string) (Result, error) {
	res := Result{RunID: runID}
	err := b.store.Update(ctx, func(tx Tx) error {
		res.Notice = ""
		rec, err := tx.RunHeader(runID)
		if err != nil {
			return err
		}
		if res.Notice = b.refuseControl("pause", rec, who, from); res.Notice != "" {
			return nil
		}
		switch {
		case rec.Status == agent.StatusAwaitingInput:
			res.Notice = noticeAlreadyPause
			return nil
		case rec.PauseBy != "":
			res.Notice = noticePausing
			return nil
		}
		rec.PauseBy = displayName(who)
		now := b.clock.stamp()
		rec.UpdatedAt = now
		if err := tx.AppendAudit(AuditEntry{At: now, Actor: who, Action: "pause", RunID: runID}); err != nil {
			return err
		}
		// The record was read without its state: only its other fields are written.
		if err := tx.PutRunHead(rec); err != nil {
			return err
		}
		res.Notice = noticePausing
		return b.recs.put(tx, rec.Thread, now, cardItem(runID))
	})
	return res, err
}

// pausedByPerson reports whether rec waits because a person paused it.
func pausedByPerson(rec *RunRecord) bool {
	return rec.Status == agent.StatusAwaitingInput && rec.State != nil && rec.State.Pause != nil && rec.State.Pause.Kind == agent.PausePerson
}

// controlButtons are the status card's buttons of a run that is not over: Resume for a run a
// person paused, Pause for one that works or will, and Cancel.
func controlButtons(rec *RunRecord) []Button {
	cancel := Button{ID: rec.CancelAction, Label: "Cancel", Style: StyleDanger, Confirm: "Cancel this run?"}
	switch {
	case pausedByPerson(rec) && rec.ContinueAction != "":
		return []Button{{ID: rec.ContinueAction, Label: "Resume", Style: StylePrimary}, cancel}
	case rec.PauseAction != "" && rec.Status != agent.StatusAwaitingInput && rec.PauseBy == "":
		return []Button{{ID: rec.PauseAction, Label: "Pause"}, cancel}
	}
	return []Button{cancel}
}
