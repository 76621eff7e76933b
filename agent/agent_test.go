package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

func newAgent(t *testing.T, m agent.Model, cfg agent.Config, tools []agent.Tool, opts ...agent.Option) *agent.Agent {
	t.Helper()
	ag, err := agent.New(cfg, m, tools, opts...)
	if err != nil {
		t.Fatalf("new agent: %v", err)
	}
	return ag
}

func TestMultiStepGoalCompletes(t *testing.T) {
	llm := newLLM(t,
		calls(call("update_plan", `{"plan":[{"step":"read the file","status":"in_progress"},{"step":"answer","status":"pending"}]}`)),
		calls(call("read", `{"q":"notes.txt"}`)),
		calls(call("update_plan", `{"plan":[{"step":"read the file","status":"done"},{"step":"answer","status":"in_progress"}]}`)),
		text("The notes say hello."),
	)
	read := &fakeTool{name: "read", readOnly: true, fn: func(context.Context, json.RawMessage) (string, error) { return "hello", nil }}
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{read}), "what do the notes say?")
	r.advance()

	r.wantStatus(agent.StatusCompleted)
	if r.st.Answer != "The notes say hello." {
		t.Errorf("answer = %q", r.st.Answer)
	}
	if r.st.Step != 4 || read.calls.Load() != 1 {
		t.Errorf("steps = %d, read calls = %d; want 4 and 1", r.st.Step, read.calls.Load())
	}
	if len(r.st.Plan) != 2 || r.st.Plan[0].Status != agent.PlanDone {
		t.Errorf("plan = %+v", r.st.Plan)
	}
	reqs := llm.requests()
	if len(reqs) != 4 {
		t.Fatalf("model consulted %d times, want 4", len(reqs))
	}
	if !llm.sawToolResult(3, "hello") {
		t.Error("the third request does not carry the read tool's result")
	}
	if !slices.Contains(llm.toolNames(0), "update_plan") || !slices.Contains(llm.toolNames(0), "ask_user") || !slices.Contains(llm.toolNames(0), "read") {
		t.Errorf("tools offered = %v", llm.toolNames(0))
	}
	if len(r.saves) < 4 {
		t.Errorf("checkpointed %d times over 4 steps", len(r.saves))
	}
	kinds := r.eventKinds()
	for _, k := range []agent.EventKind{agent.EventStepStarted, agent.EventPlanUpdated, agent.EventToolStarted, agent.EventToolFinished, agent.EventCompleted} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no %s event in %v", k, kinds)
		}
	}
}

func TestReadOnlyCallsRunInParallel(t *testing.T) {
	// Each tool waits until the other has started: run one after the other they would both
	// time out, so success proves they overlapped.
	var wg sync.WaitGroup
	wg.Add(2)
	both := make(chan struct{})
	go func() { wg.Wait(); close(both) }()
	meet := func(ctx context.Context, _ json.RawMessage) (string, error) {
		wg.Done()
		select {
		case <-both:
			return "met", nil
		case <-ctx.Done():
			return "", errors.New("the other call never started")
		}
	}
	a := &fakeTool{name: "a", readOnly: true, fn: meet, timeout: 5 * time.Second}
	b := &fakeTool{name: "b", readOnly: true, fn: meet, timeout: 5 * time.Second}
	llm := newLLM(t, calls(call("a", `{}`), call("b", `{}`)), text("done"))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{a, b}), "both")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	for _, c := range r.st.Calls {
		if c.Status != agent.CallSucceeded {
			t.Errorf("call %s: %s %s", c.Name, c.Status, c.Error)
		}
	}
}

func TestWritesRunInOrder(t *testing.T) {
	var mu sync.Mutex
	var order []string
	rec := func(name string) func(context.Context, json.RawMessage) (string, error) {
		return func(context.Context, json.RawMessage) (string, error) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			return "", nil
		}
	}
	w1 := &fakeTool{name: "w1", risk: agent.RiskCautious, fn: rec("w1")}
	w2 := &fakeTool{name: "w2", risk: agent.RiskCautious, fn: rec("w2")}
	llm := newLLM(t, calls(call("w2", `{}`), call("w1", `{}`), call("w2", `{"q":"again"}`)), text("done"))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{w1, w2}), "write")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if !slices.Equal(order, []string{"w2", "w1", "w2"}) {
		t.Errorf("order = %v", order)
	}
}

func TestApprovalSurvivesRoundTrip(t *testing.T) {
	for _, approve := range []bool{true, false} {
		name := "reject"
		if approve {
			name = "approve"
		}
		t.Run(name, func(t *testing.T) {
			deploy := &fakeTool{name: "deploy", risk: agent.RiskConfirm}
			llm := newLLM(t, calls(call("deploy", `{"q":"prod"}`)), text("finished"))
			ag := newAgent(t, llm.model, agent.Config{}, []agent.Tool{deploy})
			r := newRun(t, ag, "deploy to prod")
			r.advance()
			r.wantStatus(agent.StatusAwaitingApproval)
			if deploy.calls.Load() != 0 {
				t.Fatal("the tool ran before approval")
			}
			pending := r.st.PendingApprovals()
			if len(pending) != 1 || pending[0].Risk != agent.RiskConfirm || pending[0].ArgsHash != agent.HashArgs("deploy", `{"q":"prod"}`) {
				t.Fatalf("pending = %+v", pending)
			}

			// A restart: the saved JSON, a fresh Agent value, then the decision.
			r.reload()
			r.ag = newAgent(t, llm.model, agent.Config{}, []agent.Tool{deploy})
			if err := r.st.Decide(pending[0].ID, agent.Decision{Approved: approve, By: "U2", Reason: "not now"}); err != nil {
				t.Fatal(err)
			}
			r.advance()
			r.advance() // a second Run after the end changes nothing
			r.wantStatus(agent.StatusCompleted)
			want := int32(0)
			if approve {
				want = 1
			}
			if got := deploy.calls.Load(); got != want {
				t.Errorf("deploy ran %d times, want %d", got, want)
			}
			if !approve && !llm.sawToolResult(1, "rejected") {
				t.Error("the model was not told the call was rejected")
			}
		})
	}
}

func TestCrashRecoveryOfStartedCalls(t *testing.T) {
	for _, idempotent := range []bool{false, true} {
		t.Run(map[bool]string{false: "not idempotent", true: "idempotent"}[idempotent], func(t *testing.T) {
			var tool *fakeTool
			crash := make(chan struct{})
			tool = &fakeTool{name: "charge", risk: agent.RiskSafe, idempotent: idempotent, fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
				if tool.calls.Load() == 1 {
					close(crash)
					<-ctx.Done() // the process dies while the call runs
					return "", ctx.Err()
				}
				return "charged", nil
			}}
			llm := newLLM(t, calls(call("charge", `{"q":"5 EUR"}`)), text("done"))
			r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{tool}), "charge the card")
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-crash; cancel() }()
			if err := r.ag.Run(ctx, r.st, r.hooks()); err == nil {
				t.Fatal("an interrupted run returned no error")
			}
			r.reload()
			if c := r.st.Calls[0]; c.Status != agent.CallStarted {
				t.Fatalf("the saved call is %s, want started", c.Status)
			}
			r.advance()
			r.wantStatus(agent.StatusCompleted)
			c := r.st.Calls[0]
			if idempotent {
				if tool.calls.Load() != 2 || c.Status != agent.CallSucceeded {
					t.Errorf("idempotent call: ran %d times, status %s; want re-run once", tool.calls.Load(), c.Status)
				}
			} else {
				if tool.calls.Load() != 1 || c.Status != agent.CallUnknown {
					t.Errorf("non-idempotent call: ran %d times, status %s; want not re-run, unknown", tool.calls.Load(), c.Status)
				}
				if !llm.sawToolResult(1, "outcome unknown") {
					t.Error("the model was not told the outcome is unknown")
				}
			}
		})
	}
}

func TestBudgets(t *testing.T) {
	loop := func() step { return calls(call("look", `{"q":"x"}`)) }
	tests := []struct {
		name      string
		cfg       agent.Config
		tick      time.Duration
		usage     agent.Usage
		wantFinal bool
		wantErr   string
	}{
		{"steps", agent.Config{MaxSteps: 4, StuckThreshold: 100}, 0, agent.Usage{}, true, "step budget"},
		{"tokens", agent.Config{MaxTokens: 1000, StuckThreshold: 100}, 0, agent.Usage{PromptTokens: 300, CompletionTokens: 1}, true, "token budget"},
		// At a dollar per million tokens, 300k tokens a step cost $0.30.
		{"cost", agent.Config{MaxCost: 1, StuckThreshold: 100}, 0, agent.Usage{PromptTokens: 300_000}, true, "cost budget"},
		{"wall time", agent.Config{MaxWall: agent.Duration(time.Minute), StuckThreshold: 100}, 25 * time.Second, agent.Usage{}, true, "wall-time budget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			look := &fakeTool{name: "look", readOnly: true, fn: func(context.Context, json.RawMessage) (string, error) {
				clk.Advance(tt.tick)
				return "nothing yet", nil
			}}
			var steps []step
			for range 20 {
				steps = append(steps, withUsage(loop(), tt.usage))
			}
			llm := newLLM(t, append(steps[:0:0], steps...)...)
			llm.final = "I looked 3 times and found nothing; the search is not done."
			r := newRun(t, newAgent(t, llm.model, tt.cfg, []agent.Tool{look}, agent.WithClock(clk.Now)), "find it")
			r.advance()
			r.wantStatus(agent.StatusBudgetExhausted)
			if !strings.Contains(r.st.Error, tt.wantErr) {
				t.Errorf("error = %q, want %q", r.st.Error, tt.wantErr)
			}
			last := llm.requests()[len(llm.requests())-1]
			if tt.wantFinal && (len(last.Tools) != 0 || !strings.Contains(r.st.Answer, "not done")) {
				t.Errorf("the last call offered %d tools; answer %q", len(last.Tools), r.st.Answer)
			}
			if !slices.Contains(r.eventKinds(), agent.EventBudgetWarning) {
				t.Error("no budget warning event")
			}
		})
	}
}

func TestStuckDetection(t *testing.T) {
	t.Run("same call", func(t *testing.T) {
		look := &fakeTool{name: "look", readOnly: true}
		llm := newLLM(t, calls(call("look", `{"q":"x"}`)), calls(call("look", `{ "q": "x" }`)), calls(call("look", `{"q":"x"}`)), text("never reached"))
		r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{look}), "loop")
		r.advance()
		r.wantStatus(agent.StatusAwaitingInput)
		if r.st.Pause.Kind != agent.PauseStuck || look.calls.Load() != 3 {
			t.Errorf("pause = %+v after %d calls", r.st.Pause, look.calls.Load())
		}
		if err := r.st.Respond("", "U1"); err != nil {
			t.Fatal(err)
		}
		r.advance()
		r.wantStatus(agent.StatusCompleted)
	})
	t.Run("same error", func(t *testing.T) {
		flaky := &fakeTool{name: "flaky", fn: func(context.Context, json.RawMessage) (string, error) { return "", errors.New("connection refused") }}
		llm := newLLM(t, calls(call("flaky", `{"q":"1"}`)), calls(call("flaky", `{"q":"2"}`)), calls(call("flaky", `{"q":"3"}`)))
		r := newRun(t, newAgent(t, llm.model, agent.Config{MaxToolRetries: 10}, []agent.Tool{flaky}), "flake")
		r.advance()
		r.wantStatus(agent.StatusAwaitingInput)
		if r.st.Pause.Kind != agent.PauseStuck || !strings.Contains(r.st.Pause.Reason, "same error") {
			t.Errorf("pause = %+v", r.st.Pause)
		}
	})
}

func TestConsecutiveFailures(t *testing.T) {
	for _, handling := range []string{agent.FailureAskUser, agent.FailureAbort} {
		t.Run(handling, func(t *testing.T) {
			bad := &fakeTool{name: "bad", fn: failing("disk full")}
			llm := newLLM(t, calls(call("bad", `{"q":"1"}`)), calls(call("bad", `{"q":"2"}`)), calls(call("bad", `{"q":"3"}`)), text("gave up"))
			cfg := agent.Config{MaxConsecutiveFailures: 3, FailureHandling: handling, MaxToolRetries: 10, StuckThreshold: 10}
			r := newRun(t, newAgent(t, llm.model, cfg, []agent.Tool{bad}), "write")
			r.advance()
			if handling == agent.FailureAbort {
				r.wantStatus(agent.StatusFailed)
				// The summary names the tool and its error, not only a count.
				if !strings.Contains(r.st.Error, "3 tool calls failed in a row") || !strings.Contains(r.st.Error, "3 failed") ||
					!strings.Contains(r.st.Error, "Last failure: bad: disk full") {
					t.Errorf("error = %q", r.st.Error)
				}
				return
			}
			r.wantStatus(agent.StatusAwaitingInput)
			if r.st.Pause.Kind != agent.PauseFailures || !strings.Contains(r.st.Pause.Reason, "Last failure: bad: disk full") {
				t.Fatalf("pause = %+v", r.st.Pause)
			}
			if err := r.st.Respond("try the other disk", "U1"); err != nil {
				t.Fatal(err)
			}
			r.advance()
			r.wantStatus(agent.StatusCompleted)
			if !llm.sawUserText(3, "try the other disk") {
				t.Error("the person's instruction did not reach the model")
			}
		})
	}
}

func TestPerToolRetryLimit(t *testing.T) {
	bad := &fakeTool{name: "bad", fn: failing("nope")}
	llm := newLLM(t, calls(call("bad", `{"q":"1"}`)), calls(call("bad", `{"q":"2"}`)), calls(call("bad", `{"q":"3"}`)), text("ok"))
	r := newRun(t, newAgent(t, llm.model, agent.Config{MaxToolRetries: 2, StuckThreshold: 10, MaxConsecutiveFailures: 10}, []agent.Tool{bad}), "x")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if bad.calls.Load() != 2 {
		t.Errorf("the failing tool ran %d times, want 2 (its retry limit)", bad.calls.Load())
	}
	if !llm.sawToolResult(3, "not run again") {
		t.Error("the model was not told the tool is no longer run")
	}
}

func TestMalformedCallsGoBackToTheModel(t *testing.T) {
	tool := &fakeTool{name: "get", schema: `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`}
	tests := []struct {
		name string
		c    agent.ToolCall
		want string
	}{
		{"unknown tool", call("launch_missiles", `{}`), `unknown tool "launch_missiles"`},
		{"not json", call("get", `{"n": 1`), "not a JSON object"},
		{"array", call("get", `[1]`), "not a JSON object"},
		{"schema mismatch", call("get", `{"n":"one"}`), "do not match its schema"},
		{"missing field", call("get", `{}`), "do not match its schema"},
		{"extra field", call("get", `{"n":1,"x":2}`), "do not match its schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := newLLM(t, calls(tt.c), text("sorry"))
			r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{tool}), "x")
			r.advance()
			r.wantStatus(agent.StatusCompleted)
			if c := r.st.Calls[0]; c.Status != agent.CallInvalid {
				t.Errorf("call status = %s", c.Status)
			}
			if !llm.sawToolResult(1, tt.want) {
				t.Errorf("the model was not told %q", tt.want)
			}
		})
	}
	if tool.calls.Load() != 0 {
		t.Errorf("the tool ran %d times on bad calls", tool.calls.Load())
	}
}

func TestAskUser(t *testing.T) {
	llm := newLLM(t, calls(call("ask_user", `{"question":"Which region?"}`)), text("Deployed to eu-west-1."))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, nil), "deploy")
	r.advance()
	r.wantStatus(agent.StatusAwaitingInput)
	if r.st.Pause.Kind != agent.PauseAskUser || r.st.Pause.Question != "Which region?" {
		t.Fatalf("pause = %+v", r.st.Pause)
	}
	r.reload()
	if err := r.st.Respond("eu-west-1", "U1"); err != nil {
		t.Fatal(err)
	}
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if !llm.sawToolResult(1, "eu-west-1") {
		t.Error("the answer did not reach the model")
	}
}

func TestCancelAndShutdown(t *testing.T) {
	started := make(chan struct{})
	slow := &fakeTool{name: "slow", idempotent: true, fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}}
	t.Run("cancel", func(t *testing.T) {
		started = make(chan struct{})
		llm := newLLM(t, calls(call("slow", `{}`)))
		r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{slow}), "x")
		ctx, cancel := context.WithCancelCause(context.Background())
		go func() { <-started; cancel(agent.ErrCancelled) }()
		if err := r.ag.Run(ctx, r.st, r.hooks()); err != nil {
			t.Fatalf("a cancelled run returned %v", err)
		}
		r.wantStatus(agent.StatusCancelled)
		r.reload()
		r.wantStatus(agent.StatusCancelled)
	})
	t.Run("shutdown", func(t *testing.T) {
		started = make(chan struct{})
		llm := newLLM(t, calls(call("slow", `{}`)))
		r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{slow}), "x")
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-started; cancel() }()
		if err := r.ag.Run(ctx, r.st, r.hooks()); err == nil {
			t.Fatal("a run stopped by shutdown returned no error")
		}
		r.reload()
		r.wantStatus(agent.StatusRunning)
	})
}

func TestRiskPolicy(t *testing.T) {
	tests := []struct {
		name     string
		risk     agent.Risk
		cfg      agent.Config
		wantWait bool
	}{
		{"safe runs", agent.RiskSafe, agent.Config{}, false},
		{"cautious runs", agent.RiskCautious, agent.Config{}, false},
		{"cautious confirmed by policy", agent.RiskCautious, agent.Config{ConfirmCautious: true}, true},
		{"confirm waits", agent.RiskConfirm, agent.Config{}, true},
		{"dangerous waits", agent.RiskDangerous, agent.Config{}, true},
		{"config raises safe", agent.RiskSafe, agent.Config{RiskFloor: map[string]agent.Risk{"t": agent.RiskConfirm}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := &fakeTool{name: "t", risk: tt.risk}
			llm := newLLM(t, calls(call("t", `{}`)), text("done"))
			r := newRun(t, newAgent(t, llm.model, tt.cfg, []agent.Tool{tool}), "x")
			r.advance()
			if got := r.st.Status == agent.StatusAwaitingApproval; got != tt.wantWait {
				t.Errorf("awaiting approval = %v, want %v", got, tt.wantWait)
			}
		})
	}
	// A raised call says what raised it: the config file's table by default, or the reason
	// the command that set the floor gave.
	for _, tt := range []struct {
		name string
		why  map[string]string
		want string
	}{
		{"the config file", nil, "(raised to confirm by t in [agent.risk] of the config file)"},
		{"a stated reason", map[string]string{"t": "demo mode asks"}, "(raised to confirm: demo mode asks)"},
	} {
		t.Run("reason names "+tt.name, func(t *testing.T) {
			tool := &fakeTool{name: "t", risk: agent.RiskSafe}
			llm := newLLM(t, calls(call("t", `{}`)), text("done"))
			cfg := agent.Config{RiskFloor: map[string]agent.Risk{"t": agent.RiskConfirm}, RiskFloorReason: tt.why}
			r := newRun(t, newAgent(t, llm.model, cfg, []agent.Tool{tool}), "x")
			r.advance()
			if p := r.st.PendingApprovals(); len(p) != 1 || !strings.HasSuffix(p[0].RiskReason, tt.want) {
				t.Errorf("pending %+v, want a reason ending %q", p, tt.want)
			}
		})
	}
	t.Run("low momentum confirms cautious", func(t *testing.T) {
		bad := &fakeTool{name: "bad", fn: failing("x")}
		w := &fakeTool{name: "w", risk: agent.RiskCautious}
		llm := newLLM(t, calls(call("bad", `{"q":"1"}`)), calls(call("bad", `{"q":"2"}`)), calls(call("w", `{}`)), text("done"))
		r := newRun(t, newAgent(t, llm.model, agent.Config{LowMomentum: 2}, []agent.Tool{bad, w}), "x")
		r.advance()
		r.wantStatus(agent.StatusAwaitingApproval)
	})
}

func TestSanityCheck(t *testing.T) {
	look := &fakeTool{name: "look", readOnly: true}
	t.Run("concerns become a note", func(t *testing.T) {
		llm := newLLM(t, calls(call("look", `{"q":"1"}`)), calls(call("look", `{"q":"2"}`)), text("done"))
		sanity := newLLM(t, text(`{"verdict":"concerns","note":"You are reading the same directory again."}`), text(`not json at all`))
		r := newRun(t, newAgent(t, llm.model, agent.Config{SanityEvery: 1}, []agent.Tool{look}, agent.WithSanity(sanity.model)), "x")
		r.advance()
		r.wantStatus(agent.StatusCompleted)
		if !llm.sawUserText(1, "same directory again") {
			t.Error("the reviewer's note did not reach the executor")
		}
		if len(sanity.requests()) != 2 {
			t.Errorf("sanity consulted %d times, want 2 (every step)", len(sanity.requests()))
		}
	})
	t.Run("should_pause pauses", func(t *testing.T) {
		llm := newLLM(t, calls(call("look", `{"q":"1"}`)), text("done"))
		sanity := newLLM(t, text(`{"verdict":"should_pause","note":"This deletes production data."}`))
		r := newRun(t, newAgent(t, llm.model, agent.Config{SanityEvery: 1}, []agent.Tool{look}, agent.WithSanity(sanity.model)), "x")
		r.advance()
		r.wantStatus(agent.StatusAwaitingInput)
		if r.st.Pause.Kind != agent.PauseSanity {
			t.Errorf("pause = %+v", r.st.Pause)
		}
	})
}

func TestContextStaysUnderBudget(t *testing.T) {
	for _, strategy := range []string{agent.ContextTruncate, agent.ContextSummarize} {
		t.Run(strategy, func(t *testing.T) {
			big := strings.Repeat("log line with some detail\n", 8192/26+1)
			read := &fakeTool{name: "read", readOnly: true, fn: func(context.Context, json.RawMessage) (string, error) { return big, nil }}
			var steps []step
			for i := range 30 {
				steps = append(steps, calls(call("read", `{"q":"file-`+string(rune('a'+i%26))+`"}`)))
			}
			steps = append(steps, text("all read"))
			llm := newLLM(t, steps...)
			// The summarizer fails every other time: truncation must take over for those.
			summ := newLLM(t)
			summ.fallback = func(n int) step {
				if n%2 == 0 {
					return failure(500)
				}
				return text("a log of 300 lines, nothing unusual")
			}
			const budget = 12000
			cfg := agent.Config{ContextTokens: budget, ContextStrategy: strategy, MaxSteps: 40, StuckThreshold: 100, NoProgressSteps: -1}
			r := newRun(t, newAgent(t, llm.model, cfg, []agent.Tool{read}, agent.WithSummarizer(summ.model)), "read all the files")
			r.advance()
			r.wantStatus(agent.StatusCompleted)
			for i, req := range llm.requests() {
				if n := agent.EstimateTokens(req.Messages); n > budget {
					t.Errorf("request %d has about %d tokens, over the %d budget", i, n, budget)
				}
				if !strings.Contains(req.Messages[0].Content, "read all the files") {
					t.Errorf("request %d lost the goal", i)
				}
			}
			if strategy == agent.ContextSummarize {
				if len(summ.requests()) == 0 {
					t.Error("the summarizer was never consulted")
				}
				last := llm.requests()[len(llm.requests())-1]
				var summarised, truncated bool
				for _, m := range last.Messages {
					summarised = summarised || strings.Contains(m.Content, "[summary of an older output")
					truncated = truncated || strings.Contains(m.Content, "older result shortened to fit the context")
				}
				if !summarised || !truncated {
					t.Errorf("want both summaries and truncations after summarizer failures: summarised %v, truncated %v", summarised, truncated)
				}
			}
		})
	}
}

func TestModelFailurePausesRun(t *testing.T) {
	llm := newLLM(t, failure(400), text("back"))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, nil), "x")
	r.advance()
	r.wantStatus(agent.StatusAwaitingInput)
	if r.st.Pause.Kind != agent.PauseModelError || r.st.Step != 0 {
		t.Fatalf("pause = %+v step %d", r.st.Pause, r.st.Step)
	}
	if err := r.st.Respond("", "U1"); err != nil {
		t.Fatal(err)
	}
	r.advance()
	r.wantStatus(agent.StatusCompleted)
}

func TestModelRateLimitThenSuccess(t *testing.T) {
	llm := newLLMWith(t, llmConfig(2), step{status: 429, retryAfter: 2 * time.Second}, text("done after the wait"))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, nil), "x")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if len(llm.sleeps) != 1 || llm.sleeps[0] != 2*time.Second {
		t.Errorf("waits = %v, want the 2s the endpoint asked for", llm.sleeps)
	}
}

func TestModelRateLimitOutlastsRetriesPausesRun(t *testing.T) {
	limited := step{status: 429, retryAfter: time.Second}
	llm := newLLMWith(t, llmConfig(1), limited, limited, text("back"))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, nil), "x")
	r.advance()
	r.wantStatus(agent.StatusAwaitingInput)
	if r.st.Pause.Kind != agent.PauseModelError || !strings.Contains(r.st.Pause.Reason, "rate limited") {
		t.Fatalf("pause = %+v", r.st.Pause)
	}
	if err := r.st.Respond("", "U1"); err != nil {
		t.Fatal(err)
	}
	r.advance()
	r.wantStatus(agent.StatusCompleted)
}

func TestNewRejectsBadTools(t *testing.T) {
	llm := newLLM(t)
	tests := []struct {
		name  string
		tools []agent.Tool
		want  string
	}{
		{"duplicate", []agent.Tool{&fakeTool{name: "a"}, &fakeTool{name: "a"}}, "two tools are named"},
		{"control name", []agent.Tool{&fakeTool{name: "ask_user"}}, "two tools are named"},
		{"schema not JSON", []agent.Tool{&fakeTool{name: "a", schema: `{"type":`}}, "parameter schema"},
		{"schema not an object", []agent.Tool{&fakeTool{name: "a", schema: `["object"]`}}, "parameter schema"},
	}
	for _, tt := range tests {
		_, err := agent.New(agent.Config{}, llm.model, tt.tools)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestCheckpointsPerStep pins down how often a run hits the store: a step whose calls are all
// idempotent and need no person is saved once, after its results; a step with a call that has
// effects is also saved when the model asks for it and around the call, so that its intent
// and its outcome are durable.
func TestCheckpointsPerStep(t *testing.T) {
	for _, tc := range []struct {
		name       string
		idempotent bool
		want       int
	}{
		// Three steps of one call each, then the answer: a save as the run starts (so the
		// thread shows it working during the first model call), one after each step's
		// results and one when the run completes.
		{name: "idempotent", idempotent: true, want: 1 + 3 + 1},
		// Each step is saved four times: the model's request, the call's intent before it
		// runs, its result as soon as it returns (the step's save may wait on a sanity
		// check), and the step's own save.
		{name: "with effects", idempotent: false, want: 1 + 3*4 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := &fakeTool{name: "touch", risk: agent.RiskSafe, idempotent: tc.idempotent}
			llm := newLLM(t, calls(call("touch", `{"q":"1"}`)), calls(call("touch", `{"q":"2"}`)), calls(call("touch", `{"q":"3"}`)), text("done"))
			r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{tool}), "touch three times")
			r.advance()
			r.wantStatus(agent.StatusCompleted)
			if got := len(r.saves); got != tc.want {
				t.Errorf("%d checkpoints, want %d", got, tc.want)
			}
			if n := tool.calls.Load(); n != 3 {
				t.Errorf("the tool ran %d times, want 3", n)
			}
		})
	}
}
