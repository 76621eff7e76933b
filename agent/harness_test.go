package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// clock is a fake clock that moves only when a test moves it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeTool is a tool whose behaviour a test sets, counting how often it ran.
type fakeTool struct {
	name       string
	readOnly   bool
	idempotent bool
	executes   bool
	risk       agent.Risk
	schema     string
	timeout    time.Duration
	fn         func(ctx context.Context, args json.RawMessage) (string, error)
	calls      atomic.Int32
}

func (f *fakeTool) Info() agent.ToolInfo {
	schema := f.schema
	if schema == "" {
		schema = `{"type":"object","properties":{"q":{"type":"string"}}}`
	}
	return agent.ToolInfo{
		Spec:       agent.ToolSpec{Name: f.name, Description: "test tool " + f.name, Parameters: json.RawMessage(schema)},
		ReadOnly:   f.readOnly,
		Idempotent: f.idempotent,
		Timeout:    f.timeout,
		Executes:   f.executes,
	}
}

func (f *fakeTool) Assess(json.RawMessage) agent.Assessment {
	r := f.risk
	if r == 0 {
		r = agent.RiskSafe
	}
	return agent.Assessment{Risk: r, Reason: "test says " + r.String()}
}

func (f *fakeTool) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	f.calls.Add(1)
	if f.fn != nil {
		return f.fn(ctx, inv.Args)
	}
	return "ok from " + f.name, nil
}

// run is one run under test: its state, what was checkpointed and what was observed.
type run struct {
	t      *testing.T
	ag     *agent.Agent
	st     *agent.State
	mu     sync.Mutex
	saves  [][]byte
	events []agent.Event
}

func newRun(t *testing.T, ag *agent.Agent, goal string) *run {
	t.Helper()
	return &run{t: t, ag: ag, st: agent.NewState("run-"+t.Name(), goal, nil, time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))}
}

func (r *run) hooks() agent.Hooks {
	return agent.Hooks{
		Checkpoint: func(ctx context.Context, st *agent.State) error {
			b, err := json.Marshal(st)
			if err != nil {
				return err
			}
			r.mu.Lock()
			r.saves = append(r.saves, b)
			r.mu.Unlock()
			return nil
		},
		Observer: agent.ObserverFunc(func(ev agent.Event) {
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		}),
	}
}

// advance runs the loop until it stops and fails the test on an error.
func (r *run) advance() {
	r.t.Helper()
	if err := r.ag.Run(context.Background(), r.st, r.hooks()); err != nil {
		r.t.Fatalf("run: %v", err)
	}
}

// reload replaces the in-memory state with the last checkpoint, as a restart would.
func (r *run) reload() {
	r.t.Helper()
	r.mu.Lock()
	last := r.saves[len(r.saves)-1]
	r.mu.Unlock()
	st, err := agent.UnmarshalState(last)
	if err != nil {
		r.t.Fatalf("reload: %v", err)
	}
	r.st = st
}

func (r *run) wantStatus(want agent.Status) {
	r.t.Helper()
	if r.st.Status != want {
		r.t.Fatalf("status = %s, want %s (pause %+v, error %q)", r.st.Status, want, r.st.Pause, r.st.Error)
	}
}

func (r *run) eventKinds() []agent.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []agent.EventKind
	for _, e := range r.events {
		out = append(out, e.Kind)
	}
	return out
}

func call(name, args string) agent.ToolCall { return agent.ToolCall{Name: name, Arguments: args} }

func failing(msg string) func(context.Context, json.RawMessage) (string, error) {
	n := 0
	return func(context.Context, json.RawMessage) (string, error) {
		n++
		return "", fmt.Errorf("%s (%d)", msg, n)
	}
}
