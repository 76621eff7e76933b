package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// The makespan scenarios' fake model runs in a child process, so that the peak RSS and the
// CPU time of this process are the bot's side (bot, store, model client) and not the fake's.
// It still shares the machine's cores with the bot, where a real provider would not, so by
// default it is llmtest's Lean server, which keeps and decodes nothing; -makespan-model=llmtest
// serves the same answers from llmtest's Server, which records and decodes every request,
// to compare what the fake costs. The child (child_process.go) prints its URL, then answers
// each "stats" line with a JSON line of its counts and its CPU time.

// modelProcessEnv, set in the environment of loopbench (or its test binary), makes it serve
// the makespan scenario's model instead of measuring: see serveModel.
const modelProcessEnv = "LOOPBENCH_MAKESPAN_MODEL"

// Kinds of fake model, for -makespan-model.
const (
	modelLean    = "lean"
	modelLLMTest = "llmtest"
)

// modelStats is what the model process says of itself: llmtest.LeanStats and the CPU time
// it used (user and system) since it started.
type modelStats struct {
	llmtest.LeanStats
	CPUSeconds float64 `json:"cpu_s"`
}

// modelProcess is a running model process.
type modelProcess struct {
	*childProcess
	url string
}

// startModelProcess starts this executable again as the makespan model server of kind, for
// runs of steps steps at latency.
func startModelProcess(ctx context.Context, kind string, steps int, latency time.Duration) (*modelProcess, error) {
	child, first, err := startChild(ctx, "model process", fmt.Sprintf("%s=%d,%s,%s", modelProcessEnv, steps, latency, kind))
	if err != nil {
		return nil, err
	}
	return &modelProcess{childProcess: child, url: first}, nil
}

// stats asks the child for its counts and CPU time.
func (p *modelProcess) stats(ctx context.Context) (modelStats, error) {
	l, err := p.ask(ctx, "stats", 10*time.Second)
	if err != nil {
		return modelStats{}, fmt.Errorf("model process stats: %w", err)
	}
	var st modelStats
	if err := json.Unmarshal([]byte(l), &st); err != nil {
		return modelStats{}, fmt.Errorf("model process stats %q: %w", l, err)
	}
	return st, nil
}

// checkModelRequests fails unless the model was asked exactly what runs runs of steps
// steps ask between before and after: a tool call steps-1 times and an answer once each,
// with no request refused. The stored runs show each run's own steps; this also catches
// requests that a run made but did not record, such as a step asked twice.
func checkModelRequests(before, after modelStats, runs, steps int) error {
	d := llmtest.LeanStats{
		Requests:  after.Requests - before.Requests,
		ToolCalls: after.ToolCalls - before.ToolCalls,
		Texts:     after.Texts - before.Texts,
		Refused:   after.Refused - before.Refused,
	}
	want := llmtest.LeanStats{Requests: int64(runs * steps), ToolCalls: int64(runs * (steps - 1)), Texts: int64(runs)}
	if d != want {
		return fmt.Errorf("the model answered %+v, want %+v", d, want)
	}
	return nil
}

// serveModel is the model process: spec is "steps,latency,kind". It prints the server's
// base URL on out, then answers "stats" lines read from in until in closes. A run's request
// says how far the run got (one tool result per step done): the model asks for a tool call
// until steps-1 are done, then answers.
func serveModel(spec string, in io.Reader, out io.Writer) error {
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return fmt.Errorf("%s=%q: want steps,latency,kind", modelProcessEnv, spec)
	}
	steps, err := strconv.Atoi(parts[0])
	if err != nil || steps < 1 {
		return fmt.Errorf("%s=%q: want a positive number of steps", modelProcessEnv, spec)
	}
	latency, err := time.ParseDuration(parts[1])
	if err != nil {
		return fmt.Errorf("%s=%q: %w", modelProcessEnv, spec, err)
	}
	answer := func(toolResults, tools int) llmtest.Answer {
		if toolResults < steps-1 && tools > 0 {
			return llmtest.Answer{Tool: "look", Arguments: `{"n":` + strconv.Itoa(toolResults) + `}`}
		}
		return llmtest.Answer{Text: "done"}
	}
	var url string
	var stats func() llmtest.LeanStats
	switch parts[2] {
	case modelLean:
		srv := llmtest.NewLean(latency, func(sh llmtest.Shape) llmtest.Answer { return answer(sh.ToolResults, sh.Tools) })
		if err := srv.Start(); err != nil {
			return fmt.Errorf("start model server: %w", err)
		}
		defer srv.Close()
		url, stats = srv.URL(), srv.Stats
	case modelLLMTest:
		var calls, texts atomic.Int64
		srv := llmtest.New()
		srv.SetFallback(llmtest.Delay(latency, llmtest.Func(func(r llmtest.Request) llmtest.Step {
			done := 0
			for _, m := range r.Messages {
				if m.Role == "tool" {
					done++
				}
			}
			a := answer(done, len(r.Tools))
			if a.Tool != "" {
				calls.Add(1)
				return llmtest.ToolCalls(llmtest.Call(a.Tool, a.Arguments))
			}
			texts.Add(1)
			return llmtest.Text(a.Text)
		})))
		if err := srv.Start(); err != nil {
			return fmt.Errorf("start model server: %w", err)
		}
		defer srv.Close()
		url = srv.URL()
		stats = func() llmtest.LeanStats {
			// The Func answers every request that the server decoded; the rest it refused.
			n := int64(len(srv.Requests()))
			return llmtest.LeanStats{Requests: n, ToolCalls: calls.Load(), Texts: texts.Load(), Refused: n - calls.Load() - texts.Load()}
		}
	default:
		return fmt.Errorf("%s=%q: kind is %s or %s", modelProcessEnv, spec, modelLean, modelLLMTest)
	}
	if _, err := fmt.Fprintln(out, url); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if sc.Text() != "stats" {
			return fmt.Errorf("model process: unknown command %q", sc.Text())
		}
		cpu, err := processCPU()
		if err != nil {
			return err
		}
		line, err := json.Marshal(modelStats{LeanStats: stats(), CPUSeconds: cpu.Seconds()})
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "%s\n", line); err != nil {
			return err
		}
	}
	return sc.Err()
}
