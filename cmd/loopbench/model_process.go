package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
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
// to compare what the fake costs. The two processes talk over the child's stdin and stdout:
// the child prints its URL, then answers each "stats" line with a JSON line of its counts and
// its CPU time, and exits when its stdin closes.

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
	url    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // the child's output lines after its URL
	exited chan error
	logs   *lockedBuffer
}

// startModelProcess starts this executable again as the makespan model server of kind, for
// runs of steps steps at latency.
func startModelProcess(ctx context.Context, kind string, steps int, latency time.Duration) (*modelProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("model process: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%s,%s", modelProcessEnv, steps, latency, kind))
	p := &modelProcess{cmd: cmd, lines: make(chan string, 1), exited: make(chan error, 1), logs: &lockedBuffer{}}
	cmd.Stderr = p.logs
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("model process: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("model process: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("model process: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		io.Copy(io.Discard, stdout) // so that Wait does not race the read
		p.exited <- cmd.Wait()
	}()
	first, err := p.line(ctx, 30*time.Second)
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("model process: %w; its log:\n%s", err, p.logs.String())
	}
	if !strings.HasPrefix(first, "http://") {
		p.stop()
		return nil, fmt.Errorf("model process said %q, want its URL; its log:\n%s", first, p.logs.String())
	}
	p.url = first
	return p, nil
}

// line returns the child's next output line.
func (p *modelProcess) line(ctx context.Context, limit time.Duration) (string, error) {
	select {
	case l, ok := <-p.lines:
		if !ok {
			return "", errors.New("it ended its output")
		}
		return l, nil
	case <-time.After(limit):
		return "", fmt.Errorf("no answer within %s", limit)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// stats asks the child for its counts and CPU time.
func (p *modelProcess) stats(ctx context.Context) (modelStats, error) {
	if _, err := io.WriteString(p.stdin, "stats\n"); err != nil {
		return modelStats{}, fmt.Errorf("model process stats: %w", err)
	}
	l, err := p.line(ctx, 10*time.Second)
	if err != nil {
		return modelStats{}, fmt.Errorf("model process stats: %w", err)
	}
	var st modelStats
	if err := json.Unmarshal([]byte(l), &st); err != nil {
		return modelStats{}, fmt.Errorf("model process stats %q: %w", l, err)
	}
	return st, nil
}

// stop closes the child's stdin, which ends it, and waits for it.
func (p *modelProcess) stop() error {
	p.stdin.Close()
	select {
	case err := <-p.exited:
		p.exited <- err
		return err
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		return errors.New("model process did not stop within 10s")
	}
}

func (p *modelProcess) kill() {
	p.cmd.Process.Kill()
	p.stop()
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
