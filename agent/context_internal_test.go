package agent

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBlockLayout pins down where the compaction's boundaries fall. Each case also replays
// the run's earlier prompts: a boundary never moves back, since a prompt that undid a cut
// would differ from the one before it as much as one that made a new cut.
func TestBlockLayout(t *testing.T) {
	n := func(count, v int) []int { return slices.Repeat([]int{v}, count) }
	tests := []struct {
		name                string
		full, short, gist   []int
		fixed, budget, keep int
		want                layout
	}{
		{"fewer than blockSteps times keep in full", n(15, 100), n(15, 10), n(15, 48), 50, 10000, 4, layout{}},
		{"blockSteps times keep in full are cut back to keep", n(16, 100), n(16, 10), n(16, 48), 50, 10000, 4, layout{cut: 12}},
		{"no cut until blockSteps times keep again", n(27, 100), n(27, 10), n(27, 48), 50, 10000, 4, layout{cut: 12}},
		{"the next block", n(28, 100), n(28, 10), n(28, 48), 50, 10000, 4, layout{cut: 24}},
		// At the fifth step 100+5*200 is over 1000: the steps in full are cut to at most half
		// of the 1000-100-3*20 the rest leaves, two steps.
		{"the budget cuts early and deep", n(5, 200), n(5, 20), n(5, 48), 100, 1000, 4, layout{cut: 3}},
		{"a step over the budget alone stays in full", []int{5000}, []int{20}, []int{48}, 100, 1000, 4, layout{}},
		{"the latest step stays in full", []int{100, 5000}, []int{20, 20}, []int{48, 48}, 100, 1000, 4, layout{cut: 1}},
		// With keep 1 each step cuts the one before it. Five shortened steps take half the
		// budget, not more: nothing is dropped yet.
		{"shortened steps under half the budget", n(6, 300), n(6, 100), n(6, 10), 0, 1000, 1, layout{cut: 5}},
		// Six take more than half: the oldest give way to the digest until the shortened
		// ones left take at most a quarter of the budget.
		{"dropped in a block", n(7, 300), n(7, 100), n(7, 10), 0, 1000, 1, layout{drop: 4, cut: 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := blockLayout(tt.full, tt.short, tt.gist, tt.fixed, tt.budget, tt.keep); got != tt.want {
				t.Errorf("layout = %+v, want %+v", got, tt.want)
			}
			var prev layout
			for k := 1; k <= len(tt.full); k++ {
				l := blockLayout(tt.full[:k], tt.short[:k], tt.gist[:k], tt.fixed, tt.budget, tt.keep)
				if l.drop < prev.drop || l.cut < prev.cut || l.drop > l.cut || l.cut >= k {
					t.Errorf("after %d steps layout %+v follows %+v", k, l, prev)
				}
				prev = l
			}
		})
	}
}

// nopModel satisfies Model for tests that build prompts without consulting a model.
type nopModel struct{}

func (nopModel) Complete(context.Context, Request) (Reply, error) { return Reply{}, nil }

// stepsState is a run of n steps, each one call whose output is size bytes, as the state
// holds it after the last step's results: the calls' records with their outputs, and the
// conversation with each output capped at limit as the loop reports it.
func stepsState(n, size, limit int) *State {
	st := NewState("bench", "fetch every page and summarise them", nil, time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	out := strings.Repeat("0123456789abcdef\n", size/17+1)[:size]
	for i := range n {
		id := "call-" + strconv.Itoa(i)
		args := `{"n":` + strconv.Itoa(i) + `}`
		st.Calls = append(st.Calls, CallRecord{ID: id, Name: "fetch", Arguments: args, Status: CallSucceeded, Output: out, Reported: true})
		st.Messages = append(st.Messages,
			Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: id, Name: "fetch", Arguments: args}}},
			Message{Role: RoleTool, ToolCallID: id, Name: "fetch", Content: capOutput(out, limit, id)})
	}
	return st
}

// BenchmarkPrompt measures building the prompts of a 30-step run of 8 KB outputs, one for
// each step as the loop builds them, under a tight budget (the loopbench prompt scenario's)
// and the default one; ns/prompt is the figure to read.
func BenchmarkPrompt(b *testing.B) {
	const steps = 30
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"budget=12000", Config{ContextTokens: 12000}},
		{"budget=default", Config{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ag, err := New(bc.cfg, nopModel{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			full := stepsState(steps, 8192, ag.outputCap())
			st := *full
			r := &runner{a: ag, st: &st}
			ctx := context.Background()
			b.ReportAllocs()
			prompts := 0
			for b.Loop() {
				for k := 1; k <= steps; k++ {
					st.Messages = full.Messages[:1+2*k]
					if len(r.prompt(ctx)) == 0 {
						b.Fatal("empty prompt")
					}
					prompts++
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(prompts), "ns/prompt")
		})
	}
}

// TestDigestSteps checks that the digest of dropped steps keeps a line for each call and for
// what the user and the model said between steps.
func TestDigestSteps(t *testing.T) {
	ag, err := New(Config{}, nopModel{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{a: ag, st: stepsState(0, 0, 0)}
	got := r.digestSteps([]Message{
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "fetch", Arguments: `{"n":1}`}}},
		{Role: RoleTool, ToolCallID: "c1", Name: "fetch", Content: "a long page"},
		{Role: RoleAssistant, Content: "Which page next?"},
		{Role: RoleUser, Content: "the second"},
	})
	for _, want := range []string{`- fetch({"n":1}): no result`, "- (you) Which page next?", "- (user) the second"} {
		if !strings.Contains(got, want) {
			t.Errorf("digest %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "a long page") {
		t.Errorf("digest %q holds a tool output", got)
	}
}
