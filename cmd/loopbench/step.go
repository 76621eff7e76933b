package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// stepOverhead measures what one step costs the loop itself: the model and the tool answer
// at once, so the time between two step_started events is prompt building, the tool's
// bookkeeping and the checkpoints to the real bbolt store.
func stepOverhead(ctx context.Context, o options) ([]figure, error) {
	db, closeStore, err := tempStore("loopbench-step-")
	if err != nil {
		return nil, err
	}
	defer closeStore()
	written := db.BytesWritten()
	durations, checkpoints, outputLen, err := runSteps(ctx, o, db, "step")
	if err != nil {
		return nil, err
	}
	med := median(durations)
	perStep := float64(db.BytesWritten()-written) / float64(checkpoints)
	return []figure{{
		Key:   "step_overhead_us",
		Value: float64(med.Nanoseconds()) / 1e3,
		Unit:  "µs",
		Note: fmt.Sprintf("median of %d steps (%d runs of %d tool steps), instant model and tool, %.1f bbolt checkpoints a step",
			len(durations), o.stepRuns, o.stepSteps+1, float64(checkpoints)/float64(o.stepRuns*(o.stepSteps+1))),
	}, {
		Key:   "checkpoint_bytes_per_step",
		Value: perStep,
		Unit:  "B",
		Note: fmt.Sprintf("bytes of pages the bbolt store wrote (changed pages and the meta page of each commit) over the %d checkpoints of those runs, each tool output %d bytes",
			checkpoints, outputLen),
	}}, nil
}

// runSteps runs o.stepRuns runs of o.stepSteps instant tool steps each, checkpointing every
// step to db under run IDs that start with prefix, and returns the time of each step, how
// many checkpoints were written and the size of each tool output.
func runSteps(ctx context.Context, o options, db bot.Store, prefix string) (durations []time.Duration, checkpoints, outputLen int, _ error) {
	steps := o.stepSteps
	// The model asks for one call per step, with arguments that differ every time so that
	// the stuck detector never pauses the run, and answers once it has seen enough results.
	model := modelFunc(func(ctx context.Context, req agent.Request) (agent.Reply, error) {
		done := 0
		for _, m := range req.Messages {
			if m.Role == agent.RoleTool {
				done++
			}
		}
		msg := agent.Message{Role: agent.RoleAssistant, Content: "done"}
		if done < steps {
			n := strconv.Itoa(done)
			msg = agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c" + n, Name: "look", Arguments: `{"n":` + n + `}`}}}
		}
		return agent.Reply{Message: msg, Usage: agent.Usage{PromptTokens: 500, CompletionTokens: 20, Calls: 1}}, nil
	})
	tool := instantTool{name: "look", output: "a short result of the kind a directory listing gives"}
	ag, err := agent.New(agent.Config{MaxSteps: 2*steps + 10, NoProgressSteps: noProgressOff}, model, []agent.Tool{tool})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("new agent: %w", err)
	}

	for i := range o.stepRuns {
		id := fmt.Sprintf("%s-%d", prefix, i)
		created := time.Now()
		hooks := agent.Hooks{
			Checkpoint: func(ctx context.Context, st *agent.State) error {
				checkpoints++
				return db.Update(ctx, func(tx bot.Tx) error {
					return tx.PutRun(&bot.RunRecord{
						ID: st.RunID, Thread: benchThread, Requester: benchUser, State: st,
						CreatedAt: created, UpdatedAt: time.Now(),
					})
				})
			},
			Observer: stepTimer(&durations),
		}
		st := agent.NewState(id, "benchmark the loop", nil, created)
		if err := ag.Run(ctx, st, hooks); err != nil {
			return nil, 0, 0, fmt.Errorf("run %s: %w", id, err)
		}
		if st.Status != agent.StatusCompleted || st.Step != steps+1 {
			return nil, 0, 0, fmt.Errorf("run %s ended %s after %d steps, want completed after %d", id, st.Status, st.Step, steps+1)
		}
	}
	return durations, checkpoints, len(tool.output), nil
}

// stepTimer records the time from each step_started event to the next one, or to the event
// that ends the run, into ds.
func stepTimer(ds *[]time.Duration) agent.Observer {
	var last time.Time
	return agent.ObserverFunc(func(ev agent.Event) {
		switch ev.Kind {
		case agent.EventStepStarted, agent.EventCompleted, agent.EventFailed, agent.EventCancelled, agent.EventBudgetExhausted, agent.EventPaused:
			now := time.Now()
			if !last.IsZero() {
				*ds = append(*ds, now.Sub(last))
			}
			last = now
			if ev.Kind != agent.EventStepStarted {
				last = time.Time{}
			}
		}
	})
}
