package agent

import (
	"context"
	"fmt"
)

// A person can pause a working run (the status card's Pause button): the bot keeps the
// request, and the loop asks for it through Hooks.Hold at every step boundary, before it
// consults the model. A run asked to pause waits for input (PausePerson) through AwaitInput,
// like any other pause, so it is saved as paused and outlives a restart; Respond resumes it
// (the card's Resume button), and the model is told nothing of the pause.

// PausePerson: a person paused the run.
const PausePerson PauseKind = "paused"

// holdRequested pauses the run if a person asked for it. A failure to read the request
// costs the pause one more step, never the run.
func (r *runner) holdRequested(ctx, wctx context.Context) (bool, error) {
	if r.h.Hold == nil {
		return false, nil
	}
	by, err := r.h.Hold(wctx)
	if err != nil {
		r.a.log.Warn("pause request not read", "run", r.st.RunID, "err", err)
		return false, nil
	}
	if by == "" {
		return false, nil
	}
	return true, r.pause(ctx, Pause{Kind: PausePerson, Reason: fmt.Sprintf("Paused by %s.", by)})
}
