package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// A sanity note runs the check at the next step boundary: the reviewer is told who asked, the
// executor never reads the note, and the verdict is kept for the thread even when on track.
func TestSanityOnDemand(t *testing.T) {
	look := &fakeTool{name: "look", readOnly: true}
	llm := newLLM(t, calls(call("look", `{"q":"1"}`)), text("done"))
	sanity := newLLM(t, text(`{"verdict":"on_track","note":"Reading the logs is the right start."}`))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{look}, agent.WithSanity(sanity.model)), "x")
	h := r.hooks()
	h.Steer = func(_ context.Context, after int) ([]agent.Note, error) {
		if after >= 1 {
			return nil, nil
		}
		return []agent.Note{{Seq: 1, From: "ann", Text: "(sanity check)", Sanity: true}}, nil
	}
	if err := r.ag.Run(context.Background(), r.st, h); err != nil {
		t.Fatal(err)
	}
	r.wantStatus(agent.StatusCompleted)
	reqs := sanity.requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0].Messages[1].Content, "This review was asked for because ann asked for it in the thread.") {
		t.Fatalf("sanity requests = %+v, want one that says ann asked", reqs)
	}
	for _, req := range llm.requests() {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "sanity check") {
				t.Fatalf("the executor was sent the sanity note: %q", m.Content)
			}
		}
	}
	want := []agent.Review{{Step: 0, Verdict: agent.ReviewOnTrack, Note: "Reading the logs is the right start.", Why: "ann asked for it in the thread"}}
	if len(r.st.Reviews) != 1 || r.st.Reviews[0] != want[0] || r.st.SteerSeq != 1 {
		t.Fatalf("reviews = %+v, steer seq %d; want %+v and 1", r.st.Reviews, r.st.SteerSeq, want)
	}
}

// With the sanity check on, a large output and a prompt near the budget run it by
// themselves, and say so to the reviewer; with it off, neither does.
func TestSanityTriggers(t *testing.T) {
	big := &fakeTool{name: "big", readOnly: true, fn: func(context.Context, json.RawMessage) (string, error) {
		return strings.Repeat("x", 40<<10), nil
	}}
	t.Run("large output", func(t *testing.T) {
		llm := newLLM(t, calls(call("big", `{}`)), text("done"))
		sanity := newLLM(t, text(`{"verdict":"concerns","note":"That output is mostly noise."}`))
		r := newRun(t, newAgent(t, llm.model, agent.Config{SanityEvery: 50, ContextTokens: 1 << 20}, []agent.Tool{big}, agent.WithSanity(sanity.model)), "x")
		r.advance()
		reqs := sanity.requests()
		if len(reqs) != 1 || !strings.Contains(reqs[0].Messages[1].Content, "because a tool returned a large output") {
			t.Fatalf("sanity requests = %d, want one for the large output", len(reqs))
		}
		if len(r.st.Reviews) != 1 || r.st.Reviews[0].Verdict != agent.ReviewConcerns {
			t.Fatalf("reviews = %+v", r.st.Reviews)
		}
	})
	t.Run("near the budget", func(t *testing.T) {
		look := &fakeTool{name: "look", readOnly: true, fn: func(context.Context, json.RawMessage) (string, error) {
			return strings.Repeat("y", 3000), nil
		}}
		llm := newLLM(t, calls(call("look", `{"q":"1"}`)), calls(call("look", `{"q":"2"}`)), text("done"))
		sanity := newLLM(t, text(`{"verdict":"on_track","note":"fine"}`), text(`{"verdict":"on_track","note":"fine"}`))
		r := newRun(t, newAgent(t, llm.model, agent.Config{SanityAfterFailures: true, ContextTokens: 1000, TruncateChars: 4000, OutputCap: -1, KeepRecent: 10}, []agent.Tool{look}, agent.WithSanity(sanity.model)), "x")
		r.advance()
		reqs := sanity.requests()
		if len(reqs) == 0 || !strings.Contains(reqs[0].Messages[1].Content, "the context is nearing its budget") {
			t.Fatalf("sanity requests = %d, want one for the context budget", len(reqs))
		}
	})
	t.Run("off", func(t *testing.T) {
		llm := newLLM(t, calls(call("big", `{}`)), text("done"))
		sanity := newLLM(t)
		r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{big}, agent.WithSanity(sanity.model)), "x")
		r.advance()
		if n := len(sanity.requests()); n != 0 {
			t.Fatalf("sanity consulted %d times with the check off", n)
		}
	})
}
