package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// TestStartIsSavedBeforeTheModel: a queued run is saved as running before its first model
// call, so a thread does not show it queued while the model is slow or retried.
func TestStartIsSavedBeforeTheModel(t *testing.T) {
	llm := newLLM(t, text("done"))
	ag := newAgent(t, llm.model, agent.Config{}, nil)
	st := agent.NewState("run-start", "x", nil, time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	var first agent.Status
	var requestsThen int
	saves := 0
	err := ag.Run(context.Background(), st, agent.Hooks{Checkpoint: func(ctx context.Context, s *agent.State) error {
		if saves == 0 {
			first, requestsThen = s.Status, len(llm.requests())
		}
		saves++
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if first != agent.StatusRunning || requestsThen != 0 {
		t.Errorf("the first save was of a run %s after %d model requests, want running before any", first, requestsThen)
	}
}
