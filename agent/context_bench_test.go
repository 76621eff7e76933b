package agent

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nopModel satisfies Model for tests that build prompts without consulting a model.
type nopModel struct{}

func (nopModel) Complete(context.Context, Request) (Reply, error) { return Reply{}, nil }

// stepsState is a run of n steps, each one call whose output is size bytes, as the state
// holds it after the last step's results.
func stepsState(n, size int) *State {
	st := NewState("bench", "fetch every page and summarise them", nil, time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	out := strings.Repeat("0123456789abcdef\n", size/17+1)[:size]
	for i := range n {
		id := "call-" + strconv.Itoa(i)
		st.Messages = append(st.Messages,
			Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: id, Name: "fetch", Arguments: `{"n":` + strconv.Itoa(i) + `}`}}},
			Message{Role: RoleTool, ToolCallID: id, Name: "fetch", Content: out})
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
			full := stepsState(steps, 8192)
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
