package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// BenchmarkSaveAhead runs ten-step runs whose model answers after 1 ms and whose store takes
// 1 ms to save, as a disk's sync does: with SaveAhead a step's save is written while the next
// model call is under way, so a step costs about one of them instead of both.
func BenchmarkSaveAhead(b *testing.B) {
	const steps = 10
	for _, ahead := range []bool{false, true} {
		b.Run(fmt.Sprintf("ahead=%t", ahead), func(b *testing.B) {
			look := &fakeTool{name: "look", readOnly: true, idempotent: true}
			var n int
			m := modelFunc(func(ctx context.Context, req agent.Request) (agent.Reply, error) {
				time.Sleep(time.Millisecond)
				n++
				if n%steps == 0 {
					return agent.Reply{Message: agent.Message{Role: agent.RoleAssistant, Content: "Done."}}, nil
				}
				return agent.Reply{Message: toolCall(fmt.Sprintf("c%d", n), "look")}, nil
			})
			ag, err := agent.New(agent.Config{NoProgressSteps: -1, StuckThreshold: 1000}, m, []agent.Tool{look})
			if err != nil {
				b.Fatal(err)
			}
			hooks := agent.Hooks{SaveAhead: ahead, Checkpoint: func(context.Context, *agent.State) error {
				time.Sleep(time.Millisecond)
				return nil
			}}
			for b.Loop() {
				st := agent.NewState("run-bench", "look", nil, time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
				if err := ag.Run(context.Background(), st, hooks); err != nil || st.Status != agent.StatusCompleted {
					b.Fatalf("run: %v, %s", err, st.Status)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*steps), "µs/step")
		})
	}
}
