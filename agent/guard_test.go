package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// The tests in this file each pin one guard of the loop that an outside review removed without
// any test noticing. Each says which guard it holds; removing that guard fails it.

// TestHardBudgetStops holds the four hard stops of overBudget: once a budget is spent, the
// run ends without another model call. The soft "nearly spent" path would otherwise make one
// more (final answer) call, so a missing hard stop shows up as a second request.
func TestHardBudgetStops(t *testing.T) {
	tests := []struct {
		name    string
		cfg     agent.Config
		usage   agent.Usage   // what the first (and only allowed) model call uses
		tick    time.Duration // how long the tool call takes on the fake clock
		wantErr string
	}{
		// A token budget of 1,000 is spent by a step that used 5,000.
		{"tokens", agent.Config{MaxTokens: 1000}, agent.Usage{PromptTokens: 5000}, 0, "token budget"},
		// At a dollar per million tokens, 5M prompt tokens cost $5, over a $1 budget.
		{"cost", agent.Config{MaxCost: 1}, agent.Usage{PromptTokens: 5_000_000}, 0, "cost budget"},
		// The tool call takes two minutes of a one-minute wall budget.
		{"wall time", agent.Config{MaxWall: agent.Duration(time.Minute)}, agent.Usage{}, 2 * time.Minute, "wall-time budget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			look := &fakeTool{name: "look", readOnly: true, fn: func(context.Context, json.RawMessage) (string, error) {
				clk.Advance(tt.tick)
				return "nothing yet", nil
			}}
			llm := newLLM(t, withUsage(calls(call("look", `{"q":"x"}`)), tt.usage), text("a final answer the loop must not ask for"))
			tt.cfg.StuckThreshold = 100
			r := newRun(t, newAgent(t, llm.model, tt.cfg, []agent.Tool{look}, agent.WithClock(clk.Now)), "find it")
			r.advance()
			r.wantStatus(agent.StatusBudgetExhausted)
			if n := len(llm.requests()); n != 1 {
				t.Fatalf("%d model calls, want 1: a call was made after the %s was spent", n, tt.wantErr)
			}
			if !strings.Contains(r.st.Error, tt.wantErr) {
				t.Errorf("error = %q, want it to name the %s", r.st.Error, tt.wantErr)
			}
		})
	}
	t.Run("steps", func(t *testing.T) {
		// A run saved with its step budget spent and no final answer asked for (a budget
		// lowered across a restart) ends as it is resumed.
		llm := newLLM(t, text("a final answer the loop must not ask for"))
		ag := newAgent(t, llm.model, agent.Config{MaxSteps: 3}, nil)
		r := newRun(t, ag, "find it")
		r.st.Step = 3
		r.advance()
		r.wantStatus(agent.StatusBudgetExhausted)
		if n := len(llm.requests()); n != 0 {
			t.Fatalf("%d model calls after the step budget was spent, want 0", n)
		}
		if !strings.Contains(r.st.Error, "step budget") {
			t.Errorf("error = %q, want it to name the step budget", r.st.Error)
		}
	})
}

// TestToolTimeout holds the per-tool timeout: a tool that would run forever gets a context that
// ends at the configured ToolTimeout, or at its own Timeout when it sets one, and the call fails
// with a timeout the model is told about.
func TestToolTimeout(t *testing.T) {
	tests := []struct {
		name    string
		cfg     time.Duration // Config.ToolTimeout
		own     time.Duration // the tool's own Timeout
		wantMax time.Duration
	}{
		{"config timeout", 40 * time.Millisecond, 0, 40 * time.Millisecond},
		{"tool's own timeout", time.Hour, 30 * time.Millisecond, 30 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got time.Duration
			hang := &fakeTool{name: "hang", readOnly: true, timeout: tt.own, fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
				dl, ok := ctx.Deadline()
				if !ok {
					t.Error("the tool's context has no deadline")
					return "", nil
				}
				got = time.Until(dl)
				if got > tt.wantMax {
					return "", context.DeadlineExceeded // the guard is gone: fail, do not hang
				}
				<-ctx.Done()
				return "", ctx.Err()
			}}
			llm := newLLM(t, calls(call("hang", `{"q":"x"}`)), text("it timed out"))
			r := newRun(t, newAgent(t, llm.model, agent.Config{ToolTimeout: agent.Duration(tt.cfg)}, []agent.Tool{hang}), "wait")
			r.advance()
			r.wantStatus(agent.StatusCompleted)
			if got <= 0 || got > tt.wantMax {
				t.Fatalf("the tool had %v left, want at most %v", got, tt.wantMax)
			}
			if c := r.st.Calls[0]; c.Status != agent.CallFailed {
				t.Errorf("call status %s, want failed", c.Status)
			}
		})
	}
}

// TestSanityAfterFailures holds sanity_after_failures: with the periodic check off, a step with
// a failed call still consults the reviewer, and a step without one does not.
func TestSanityAfterFailures(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			broken := &fakeTool{name: "broken", readOnly: true, fn: failing("disk on fire")}
			look := &fakeTool{name: "look", readOnly: true}
			llm := newLLM(t, calls(call("look", `{"q":"1"}`)), calls(call("broken", `{"q":"2"}`)), text("done"))
			sanity := newLLM(t, text(`{"verdict":"ok"}`), text(`{"verdict":"ok"}`))
			cfg := agent.Config{SanityEvery: 0, SanityAfterFailures: on, MaxConsecutiveFailures: 5}
			r := newRun(t, newAgent(t, llm.model, cfg, []agent.Tool{look, broken}, agent.WithSanity(sanity.model)), "x")
			r.advance()
			r.wantStatus(agent.StatusCompleted)
			want := 0
			if on {
				want = 1
			}
			if n := len(sanity.requests()); n != want {
				t.Fatalf("sanity consulted %d times, want %d (once, after the failed step)", n, want)
			}
		})
	}
}

// TestStuckToolIsAbandoned holds AbandonAfter: a tool that ignores its context (a read blocked
// on a FIFO) no longer holds its run. Cancelled, the run ends as cancelled; timed out, the call
// fails and the model is told. Both are counted as abandoned until the tool returns.
func TestStuckToolIsAbandoned(t *testing.T) {
	newStuck := func(t *testing.T) (*fakeTool, chan struct{}) {
		t.Helper()
		started, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { close(release) })
		return &fakeTool{name: "stuck", readOnly: true, fn: func(context.Context, json.RawMessage) (string, error) {
			once.Do(func() { close(started) })
			<-release // ignores ctx on purpose
			return "too late", nil
		}}, started
	}
	t.Run("cancelled", func(t *testing.T) {
		stuck, started := newStuck(t)
		llm := newLLM(t, calls(call("stuck", `{"q":"p"}`)))
		var hooked []string
		ag := newAgent(t, llm.model, agent.Config{AbandonAfter: agent.Duration(20 * time.Millisecond)}, []agent.Tool{stuck},
			agent.WithAbandonHook(func(tool string) { hooked = append(hooked, tool) }))
		r := newRun(t, ag, "read the pipe")
		ctx, cancel := context.WithCancelCause(context.Background())
		go func() { <-started; cancel(agent.ErrCancelled) }()
		if err := r.ag.Run(ctx, r.st, r.hooks()); err != nil {
			t.Fatalf("a cancelled run returned %v", err)
		}
		r.wantStatus(agent.StatusCancelled)
		if c := r.st.Calls[0]; c.Status != agent.CallUnknown {
			t.Errorf("the abandoned call is %s, want unknown", c.Status)
		}
		if total, running := ag.Abandoned(); total != 1 || running != 1 {
			t.Errorf("abandoned total %d running %d, want 1 and 1", total, running)
		}
		if len(hooked) != 1 || hooked[0] != "stuck" {
			t.Errorf("abandon hook heard %v", hooked)
		}
	})
	t.Run("timed out", func(t *testing.T) {
		stuck, _ := newStuck(t)
		llm := newLLM(t, calls(call("stuck", `{"q":"p"}`)), text("the pipe never answered"))
		ag := newAgent(t, llm.model, agent.Config{ToolTimeout: agent.Duration(10 * time.Millisecond), AbandonAfter: agent.Duration(10 * time.Millisecond)}, []agent.Tool{stuck})
		r := newRun(t, ag, "read the pipe")
		r.advance()
		r.wantStatus(agent.StatusCompleted)
		c := r.st.Calls[0]
		if c.Status != agent.CallFailed || !strings.Contains(c.Error, "abandoned") {
			t.Errorf("call %s with error %q, want failed and abandoned", c.Status, c.Error)
		}
		if !llm.sawToolResult(1, "abandoned") {
			t.Error("the model was not told the call was abandoned")
		}
	})
}

// TestOversizedArgumentsRefused holds MaxArgBytes: a tool call whose arguments pass the limit
// never reaches the tool, is not stored in full, and the model is told why.
func TestOversizedArgumentsRefused(t *testing.T) {
	write := &fakeTool{name: "write", schema: `{"type":"object","properties":{"content":{"type":"string"}}}`}
	huge := `{"content":"` + strings.Repeat("A", 2<<20) + `"}`
	llm := newLLM(t, calls(call("write", huge)), text("I will write it in parts."))
	r := newRun(t, newAgent(t, llm.model, agent.Config{MaxArgBytes: 1 << 20}, []agent.Tool{write}), "write a big file")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if n := write.calls.Load(); n != 0 {
		t.Fatalf("the tool ran %d times with oversized arguments", n)
	}
	c := r.st.Calls[0]
	if c.Status != agent.CallInvalid || !strings.Contains(c.Error, "over the limit") {
		t.Errorf("call %s with error %q, want invalid and over the limit", c.Status, c.Error)
	}
	for _, saved := range r.saves {
		if len(saved) > 1<<20 {
			t.Fatalf("a checkpoint of %d bytes holds the oversized arguments", len(saved))
		}
	}
	if !llm.sawToolResult(1, "over the limit") {
		t.Error("the model was not told why the call was refused")
	}
}

// TestToolUsageCountsAgainstBudget holds ReportUsage: what a tool spends of the model on the
// run's behalf (an MCP server sampling) is added to the run's usage, and the budgets see it.
func TestToolUsageCountsAgainstBudget(t *testing.T) {
	sampler := &fakeTool{name: "sampler", readOnly: true, fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
		agent.ReportUsage(ctx, agent.Usage{PromptTokens: 4000, CompletionTokens: 1000})
		return "summarised by the server", nil
	}}
	llm := newLLM(t, calls(call("sampler", `{"q":"x"}`)), text("a final answer the loop must not ask for"))
	r := newRun(t, newAgent(t, llm.model, agent.Config{MaxTokens: 3000, StuckThreshold: 100}, []agent.Tool{sampler}), "summarise")
	r.advance()
	r.wantStatus(agent.StatusBudgetExhausted)
	if got := r.st.Usage.Total(); got < 5000 {
		t.Errorf("run usage %d tokens, want the tool's 5000 counted", got)
	}
	if n := len(llm.requests()); n != 1 {
		t.Errorf("%d model calls, want 1: the tool's spending should have ended the run", n)
	}
}
