package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// benchThread is where every scenario's runs live.
var benchThread = bot.ThreadRef{Platform: "bench", Channel: "C1", Thread: "T1"}

var benchUser = bot.User{ID: "U1", Name: "bench"}

// instantTool answers every call at once with the same output, so a scenario measures the
// loop and what surrounds it, not the tool.
type instantTool struct {
	name   string
	output string
}

var _ agent.Tool = instantTool{}

func (t instantTool) Info() agent.ToolInfo {
	return agent.ToolInfo{
		Spec: agent.ToolSpec{
			Name:        t.name,
			Description: "Returns a fixed text for any n.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		},
		Idempotent: true,
		Timeout:    time.Minute,
	}
}

func (t instantTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "returns a fixed text"}
}

func (t instantTool) Call(context.Context, agent.Invocation) (string, error) {
	return t.output, nil
}

// modelFunc is an in-process agent.Model, for scenarios that leave HTTP out.
type modelFunc func(ctx context.Context, req agent.Request) (agent.Reply, error)

func (f modelFunc) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	return f(ctx, req)
}

// median returns the middle of ds (the mean of the two middle values for an even count);
// ds is sorted in place.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	m := len(ds) / 2
	if len(ds)%2 == 1 {
		return ds[m]
	}
	return (ds[m-1] + ds[m]) / 2
}

// tempStore opens the real bbolt store in a fresh temporary directory; closeStore closes it
// and removes the directory.
func tempStore(prefix string) (db *store.DB, closeStore func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("temp dir: %w", err)
	}
	db, err = store.Open(filepath.Join(dir, "bench.db"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("open store: %w", err)
	}
	return db, func() { db.Close(); os.RemoveAll(dir) }, nil
}
