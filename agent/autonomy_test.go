package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// TestAutonomyChangesWhatAsks runs the same cautious calls at each level through the loop:
// careful asks about a write and a cautious command, balanced and bold run them.
func TestAutonomyChangesWhatAsks(t *testing.T) {
	for _, tt := range []struct {
		level agent.Level
		tool  *fakeTool
		ask   bool
	}{
		{agent.LevelCareful, &fakeTool{name: "write", risk: agent.RiskCautious}, true},
		{agent.LevelCareful, &fakeTool{name: "sh", risk: agent.RiskCautious, executes: true}, true},
		{agent.LevelBalanced, &fakeTool{name: "write", risk: agent.RiskCautious}, false},
		{agent.LevelBalanced, &fakeTool{name: "sh", risk: agent.RiskCautious, executes: true}, false},
		{agent.LevelBold, &fakeTool{name: "sh", risk: agent.RiskCautious, executes: true}, false},
		{"", &fakeTool{name: "write", risk: agent.RiskCautious}, false}, // the configured default, balanced
	} {
		t.Run(fmt.Sprintf("%s/%s", tt.level, tt.tool.name), func(t *testing.T) {
			llm := newLLM(t, calls(call(tt.tool.name, `{}`)), text("done"))
			r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{tt.tool}), "x")
			r.st.Autonomy = tt.level
			r.advance()
			if got := r.st.Status == agent.StatusAwaitingApproval; got != tt.ask {
				t.Fatalf("awaiting approval = %v, want %v", got, tt.ask)
			}
			if tt.ask && !strings.Contains(r.st.Calls[0].RiskReason, "autonomy (careful)") {
				t.Errorf("reason %q does not say the level asked", r.st.Calls[0].RiskReason)
			}
		})
	}
	t.Run("configured default", func(t *testing.T) {
		w := &fakeTool{name: "write", risk: agent.RiskCautious}
		llm := newLLM(t, calls(call("write", `{}`)), text("done"))
		r := newRun(t, newAgent(t, llm.model, agent.Config{Autonomy: agent.LevelCareful}, []agent.Tool{w}), "x")
		r.advance()
		r.wantStatus(agent.StatusAwaitingApproval)
	})
}

// TestBoldNeverRelaxesDangerous: at the boldest level, with full momentum, confirm and
// dangerous calls still wait for a person and never run.
func TestBoldNeverRelaxesDangerous(t *testing.T) {
	for _, risk := range []agent.Risk{agent.RiskConfirm, agent.RiskDangerous} {
		t.Run(risk.String(), func(t *testing.T) {
			tool := &fakeTool{name: "rm", risk: risk, executes: true}
			llm := newLLM(t, calls(call("rm", `{}`)), text("done"))
			r := newRun(t, newAgent(t, llm.model, agent.Config{Autonomy: agent.LevelBold}, []agent.Tool{tool}), "x")
			r.st.Autonomy = agent.LevelBold
			r.advance()
			r.wantStatus(agent.StatusAwaitingApproval)
			if n := tool.calls.Load(); n != 0 {
				t.Fatalf("a %s call ran %d times at bold", risk, n)
			}
		})
	}
}

// TestAutonomyHookUpdatesTheRun: an approver changing the channel's level changes what a
// working run asks from its next step, and the state records the new level.
func TestAutonomyHookUpdatesTheRun(t *testing.T) {
	w := &fakeTool{name: "write", risk: agent.RiskCautious}
	llm := newLLM(t, calls(call("write", `{"q":"1"}`)), calls(call("write", `{"q":"2"}`)), text("done"))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{w}), "x")
	r.st.Autonomy = agent.LevelBalanced
	level := agent.LevelBalanced
	h := r.hooks()
	h.Autonomy = func(context.Context) (agent.Level, error) {
		l := level
		level = agent.LevelCareful // the approver acts while the first call runs
		return l, nil
	}
	if err := r.ag.Run(context.Background(), r.st, h); err != nil {
		t.Fatal(err)
	}
	r.wantStatus(agent.StatusAwaitingApproval)
	if w.calls.Load() != 1 || r.st.Autonomy != agent.LevelCareful {
		t.Fatalf("%d writes ran, level %q; want the first to run and the second to ask at careful", w.calls.Load(), r.st.Autonomy)
	}
}

// TestMomentumPausesAFailingRun: failures spread between successes never make five in a
// row, but six of the last eight calls failing pause the run with a check-in that says what
// went wrong; the window survives a restart, and Continue starts it afresh.
func TestMomentumPausesAFailingRun(t *testing.T) {
	tools := []agent.Tool{&fakeTool{name: "good", fn: echo}}
	for _, n := range []string{"bad1", "bad2", "bad3"} {
		tools = append(tools, &fakeTool{name: n, fn: failing(n + " broke")})
	}
	w := &fakeTool{name: "write", risk: agent.RiskCautious}
	tools = append(tools, w)
	order := []string{"bad1", "bad2", "good", "bad3", "bad1", "bad2", "bad3"}
	var script []step
	for i, n := range order {
		script = append(script, calls(call(n, fmt.Sprintf(`{"q":"%d"}`, i))))
		if i == 5 {
			// Five of six failed: momentum 0.375, below balanced's 0.5, so a cautious write
			// asks even though balanced writes without asking.
			script = append(script, calls(call("write", `{}`)))
		}
	}
	script = append(script, text("done"))
	llm := newLLM(t, script...)
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, tools), "x")
	r.advance()
	r.wantStatus(agent.StatusAwaitingApproval)
	if c := r.st.Calls[len(r.st.Calls)-1]; c.Name != "write" || !strings.Contains(c.RiskReason, "momentum is low") {
		t.Fatalf("last call %s with reason %q, want the write held for low momentum", c.Name, c.RiskReason)
	}
	if err := r.st.Decide(r.st.Calls[len(r.st.Calls)-1].ID, agent.Decision{Approved: true, By: "U1"}); err != nil {
		t.Fatal(err)
	}
	r.advance()
	r.wantStatus(agent.StatusAwaitingInput)
	if r.st.Pause.Kind != agent.PauseMomentum || !strings.Contains(r.st.Pause.Reason, "6 failed") ||
		!strings.Contains(r.st.Pause.Reason, "bad3: bad3 broke") {
		t.Fatalf("pause %+v, want a momentum check-in naming the failures", r.st.Pause)
	}
	if r.st.ConsecutiveFailures >= 5 {
		t.Fatalf("%d failures in a row: the failure rule, not momentum, would have paused", r.st.ConsecutiveFailures)
	}
	r.reload()
	if got := r.st.Momentum.Score(); got != 0.25 {
		t.Fatalf("momentum after a restart %v, want 0.25", got)
	}
	if err := r.st.Respond("", "U1"); err != nil {
		t.Fatal(err)
	}
	if r.st.Momentum.Score() != 1 {
		t.Errorf("momentum %v after Continue, want a fresh start", r.st.Momentum.Score())
	}
	r.advance()
	r.wantStatus(agent.StatusCompleted)
}

// TestPauseEveryNChecksIn: careful checks in every ten steps; Continue goes on.
func TestPauseEveryNChecksIn(t *testing.T) {
	look := &fakeTool{name: "look", readOnly: true, fn: echo}
	var script []step
	for i := range 12 {
		script = append(script, calls(call("look", fmt.Sprintf(`{"q":"%d"}`, i))))
	}
	script = append(script, text("done"))
	llm := newLLM(t, script...)
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{look}), "x")
	r.st.Autonomy = agent.LevelCareful
	r.advance()
	r.wantStatus(agent.StatusAwaitingInput)
	if r.st.Pause.Kind != agent.PauseCheckIn || r.st.Step != 10 || !strings.Contains(r.st.Pause.Reason, "every 10 steps") {
		t.Fatalf("pause %+v at step %d, want a check-in at step 10", r.st.Pause, r.st.Step)
	}
	if err := r.st.Respond("keep it short", "U1"); err != nil {
		t.Fatal(err)
	}
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if !llm.sawUserText(10, "keep it short") {
		t.Error("the guidance given at the check-in did not reach the model")
	}

	// Balanced never checks in.
	llm = newLLM(t, script...)
	r = newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{look}), "x")
	r.st.Autonomy = agent.LevelBalanced
	r.advance()
	r.wantStatus(agent.StatusCompleted)
}

func echo(_ context.Context, args json.RawMessage) (string, error) {
	return "result " + string(args), nil
}

// TestMomentumContinuation: Continue after a momentum check-in tells the model what went
// wrong and to change course.
func TestMomentumContinuation(t *testing.T) {
	bad := &fakeTool{name: "bad", fn: failing("disk full")}
	llm := newLLM(t, text("done"))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{bad}), "x")
	r.st.Status = agent.StatusAwaitingInput
	r.st.Pause = &agent.Pause{Kind: agent.PauseMomentum, Reason: "low"}
	r.st.Calls = []agent.CallRecord{{ID: "c1", Name: "bad", Status: agent.CallFailed, Error: "disk full (1)", Reported: true}}
	if err := r.st.Respond("", "U1"); err != nil {
		t.Fatal(err)
	}
	r.advance()
	if !llm.sawUserText(0, "latest failure was bad: disk full (1)") {
		t.Error("the model was not told what went wrong")
	}
}
