package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// TestNaturalContinuation checks what the model is sent when a person lets a paused run go on
// without a word: a nudge derived from the state, or nothing at all.
func TestNaturalContinuation(t *testing.T) {
	lastUser := func(req agent.Request) string {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := req.Messages[i]; m.Role == agent.RoleUser && !strings.HasPrefix(m.Content, "Your plan so far") {
				return m.Content
			}
		}
		return ""
	}
	t.Run("after failures: reassess, naming the failure", func(t *testing.T) {
		bad := &fakeTool{name: "bad", fn: failing("disk full")}
		llm := newLLM(t, calls(call("bad", `{"q":"1"}`)), calls(call("bad", `{"q":"2"}`)), text("I will stop."))
		r := newRun(t, newAgent(t, llm.model, agent.Config{MaxConsecutiveFailures: 2, MaxToolRetries: 10, StuckThreshold: 10}, []agent.Tool{bad}), "write")
		r.advance()
		r.wantStatus(agent.StatusAwaitingInput)
		if err := r.st.Respond("", "U1"); err != nil {
			t.Fatal(err)
		}
		r.advance()
		got := lastUser(llm.requests()[2])
		if !strings.Contains(got, "reassess") || !strings.Contains(got, "bad: disk full (2)") || strings.Contains(got, "Continue.") {
			t.Errorf("nudge after failures = %q", got)
		}
	})
	t.Run("when stuck: reflect, and the plan's next step", func(t *testing.T) {
		look := &fakeTool{name: "look", readOnly: true}
		plan := call("update_plan", `{"plan":[{"step":"find the config","status":"done"},{"step":"read the logs","status":"pending"}]}`)
		llm := newLLM(t, calls(plan), calls(call("look", `{"q":"a"}`)), calls(call("look", `{"q":"a"}`)), text("done"))
		r := newRun(t, newAgent(t, llm.model, agent.Config{StuckThreshold: 2}, []agent.Tool{look}), "debug it")
		r.advance()
		r.wantStatus(agent.StatusAwaitingInput)
		if r.st.Pause.Kind != agent.PauseStuck {
			t.Fatalf("pause = %+v", r.st.Pause)
		}
		if err := r.st.Respond("", "U1"); err != nil {
			t.Fatal(err)
		}
		r.advance()
		got := lastUser(llm.requests()[3])
		if !strings.Contains(got, "Reflect on why") || !strings.Contains(got, "next step of your plan: read the logs") {
			t.Errorf("nudge when stuck = %q", got)
		}
	})
	t.Run("after a model error: nothing added", func(t *testing.T) {
		llm := newLLM(t, failure(400), text("back"))
		r := newRun(t, newAgent(t, llm.model, agent.Config{}, nil), "x")
		r.advance()
		r.wantStatus(agent.StatusAwaitingInput)
		before := len(r.st.Messages)
		if err := r.st.Respond("", "U1"); err != nil {
			t.Fatal(err)
		}
		if len(r.st.Messages) != before {
			t.Errorf("resuming after a model error added %q", r.st.Messages[len(r.st.Messages)-1].Content)
		}
		r.advance()
		r.wantStatus(agent.StatusCompleted)
	})
	t.Run("an empty reply: pointed at the next step", func(t *testing.T) {
		plan := call("update_plan", `{"plan":[{"step":"write the summary","status":"in_progress"}]}`)
		llm := newLLM(t, calls(plan), text(""), text("Summary: all good."))
		r := newRun(t, newAgent(t, llm.model, agent.Config{}, nil), "summarise")
		r.advance()
		r.wantStatus(agent.StatusCompleted)
		if got := lastUser(llm.requests()[2]); !strings.Contains(got, "empty") || !strings.Contains(got, "write the summary") {
			t.Errorf("nudge after an empty reply = %q", got)
		}
	})
}

// TestStuckInACycle holds the cycle rule: a run going round two calls (A B A B A B) pauses as
// stuck, as one repeating a single call does.
func TestStuckInACycle(t *testing.T) {
	look := &fakeTool{name: "look", readOnly: true}
	var steps []step
	for i := range 8 {
		steps = append(steps, calls(call("look", `{"q":"`+string(rune('a'+i%2))+`"}`)))
	}
	llm := newLLM(t, append(steps, text("done"))...)
	r := newRun(t, newAgent(t, llm.model, agent.Config{StuckThreshold: 3}, []agent.Tool{look}), "find it")
	r.advance()
	r.wantStatus(agent.StatusAwaitingInput)
	if r.st.Pause.Kind != agent.PauseStuck || !strings.Contains(r.st.Pause.Reason, "cycle") {
		t.Fatalf("pause = %+v", r.st.Pause)
	}
	if n := look.calls.Load(); n != 6 {
		t.Errorf("the cycle ran %d calls before the pause, want 6", n)
	}
}

// TestFinalQuestionAwaitsInput holds the question rule: a reply that ends by asking the person
// something leaves the run awaiting input, and the person's answer reaches the model.
func TestFinalQuestionAwaitsInput(t *testing.T) {
	llm := newLLM(t, text("I found two databases. Which one should I migrate, staging or production?"), text("Migrated staging."))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, nil), "migrate the database")
	r.advance()
	r.wantStatus(agent.StatusAwaitingInput)
	if r.st.Pause.Kind != agent.PauseQuestion || !strings.Contains(r.st.Pause.Question, "Which one") {
		t.Fatalf("pause = %+v", r.st.Pause)
	}
	if err := r.st.Respond("staging", "ann"); err != nil {
		t.Fatal(err)
	}
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if !llm.sawUserText(1, "answered: staging") {
		t.Error("the person's answer did not reach the model")
	}
}

// TestNoProgressPauses holds no_progress_steps: calls that bring nothing new (the same result
// again and again, under different arguments, so neither repeat nor cycle rules see it) pause
// the run after that many steps; a new result resets the count.
func TestNoProgressPauses(t *testing.T) {
	n := 0
	poll := &fakeTool{name: "poll", readOnly: true, fn: func(context.Context, json.RawMessage) (string, error) {
		n++
		if n == 3 {
			return "status: rolling out", nil // something new once
		}
		return "status: pending", nil
	}}
	var steps []step
	for i := range 20 {
		steps = append(steps, calls(call("poll", fmt.Sprintf(`{"q":"%d"}`, i))))
	}
	llm := newLLM(t, append(steps, text("done"))...)
	r := newRun(t, newAgent(t, llm.model, agent.Config{NoProgressSteps: 4, StuckThreshold: 100}, []agent.Tool{poll}), "wait for the rollout")
	r.advance()
	r.wantStatus(agent.StatusAwaitingInput)
	if r.st.Pause.Kind != agent.PauseStuck || !strings.Contains(r.st.Pause.Reason, "No new result") {
		t.Fatalf("pause = %+v", r.st.Pause)
	}
	if got := poll.calls.Load(); got != 7 {
		t.Errorf("paused after %d calls, want 7 (new results at calls 1 and 3, then 4 steps without)", got)
	}
}

// TestSteerTakesEachNoteOnce holds SteerSeq: the bot hands over every note after the last one
// the state took, and a note it hands over again (after a crash, say) is not added twice.
func TestSteerTakesEachNoteOnce(t *testing.T) {
	look := &fakeTool{name: "look", readOnly: true, fn: func(_ context.Context, args json.RawMessage) (string, error) { return string(args), nil }}
	llm := newLLM(t, calls(call("look", `{"q":"1"}`)), calls(call("look", `{"q":"2"}`)), text("done"))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{look}), "look around")
	h := r.hooks()
	h.Steer = func(context.Context, int) ([]agent.Note, error) {
		// A careless store that always answers with every note it has.
		return []agent.Note{{Seq: 1, From: "ann", Text: "check the logs too"}}, nil
	}
	if err := r.ag.Run(context.Background(), r.st, h); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range r.st.Messages {
		if strings.Contains(m.Content, "While you work, ann says: check the logs too") {
			n++
		}
	}
	if n != 1 || r.st.SteerSeq != 1 {
		t.Errorf("note taken %d times, SteerSeq %d; want once and 1", n, r.st.SteerSeq)
	}
}
