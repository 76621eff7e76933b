package bot_test

import (
	"testing"
	"testing/synctest"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// TestRunsInFlightReachTheGCPacer checks that the scheduler tells the GC pacer of a run
// while it is in flight, and of its end (gcpacer.go).
func TestRunsInFlightReachTheGCPacer(t *testing.T) {
	for _, tt := range []struct {
		name  string
		mb    int
		paced int
	}{{"the default", 0, 1}, {"the default pacing asked for", -1, 0}} {
		t.Run(tt.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				all, paced := bot.RunsInFlight()
				slow := &tool{name: "slow", risk: agent.RiskSafe, block: true}
				h := newHarness(t, bot.Config{GCMemoryMB: tt.mb}, slow)
				h.model.add(use("slow", `{"q":"a"}`))
				res := h.mention(ann, "wait for it")
				synctest.Wait()
				if a, p := bot.RunsInFlight(); a != all+1 || p != paced+tt.paced {
					t.Errorf("%d runs in flight (%d paced) while one works, want %d (%d)", a, p, all+1, paced+tt.paced)
				}
				h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandCancel, User: ann})
				h.settle()
				h.wantStatus(res.RunID, agent.StatusCancelled)
				if a, p := bot.RunsInFlight(); a != all || p != paced {
					t.Errorf("%d runs in flight (%d paced) after it ended, want %d (%d)", a, p, all, paced)
				}
			})
		})
	}
}
