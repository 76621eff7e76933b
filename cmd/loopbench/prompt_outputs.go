package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// The prompt scenario's tool returns what a coding or research agent's tools return, in
// turn: a test run's log (its failure and exit status at the end), a web page as text (its
// title at the start), and a file listing (its count at the end). Their sizes vary around
// -output-kb, from 3/8 to 13/8 of it, so some fit under the output cap and most do not.
// Each output has a first and a last line of its own; the scenario checks that the model
// was shown both when the output came back.

// outputSizes are the sizes of successive outputs, in eighths of -output-kb: a mean of one.
var outputSizes = []int{3, 8, 13, 6, 10}

// scenarioOutput is the output of call n (from 1) with a mean size of meanKB, with its first
// and last lines.
func scenarioOutput(n, meanKB int) (out, first, last string) {
	size := meanKB * 1024 * outputSizes[(n-1)%len(outputSizes)] / 8
	var line func(i int) string
	switch n % 3 {
	case 0:
		first = fmt.Sprintf("$ go test ./internal/pkg%02d/...", n)
		last = fmt.Sprintf("FAIL\tgithub.com/example/svc/internal/pkg%02d\t0.%03ds\nexit status 1 (run %d)", n, n*37%1000, n)
		line = func(i int) string {
			return fmt.Sprintf("=== RUN   TestHandler%02d_case%03d\n--- PASS: TestHandler%02d_case%03d (0.%02ds)", n, i, n, i, i%100)
		}
		last = fmt.Sprintf("--- FAIL: TestEdge%02d (0.02s)\n    edge_test.go:%d: got %d, want %d\n", n, 40+n, n, n+1) + last
	case 1:
		first = fmt.Sprintf("Release notes, part %d - Example Service documentation", n)
		last = fmt.Sprintf("Last updated 2026-11-%02d. Page %d of the release notes ends here.", 1+n%28, n)
		line = func(i int) string {
			return fmt.Sprintf("Section %d.%d. The service now retries failed uploads up to %d times, keeps a journal of each "+
				"attempt and reports the outcome on the status page; see the migration guide for details.", n, i, 2+i%5)
		}
	default:
		first = fmt.Sprintf("$ find /srv/data/batch-%02d -type f -printf '%%p %%s\\n'", n)
		line = func(i int) string {
			return fmt.Sprintf("/srv/data/batch-%02d/shard-%02d/record-%05d.json %d", n, i%16, i, 700+i*13%900)
		}
	}
	var b strings.Builder
	b.WriteString(first)
	i := 0
	for {
		l := "\n" + line(i)
		if b.Len()+len(l)+1+len(last) > size {
			break
		}
		b.WriteString(l)
		i++
	}
	if n%3 == 2 {
		last = fmt.Sprintf("%d files listed under /srv/data/batch-%02d", i, n)
	}
	b.WriteString("\n" + last)
	return b.String(), first, last
}

// outputsTool is the scenario's tool: call {"n":k} returns scenarioOutput(k).
type outputsTool struct {
	name   string
	meanKB int
}

func (t outputsTool) Info() agent.ToolInfo {
	return agent.ToolInfo{
		Spec: agent.ToolSpec{
			Name:        t.name,
			Description: "Returns item n: a test log, a page or a file listing.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		},
		Idempotent: true,
		Timeout:    time.Minute,
	}
}

func (t outputsTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "returns a fixed text"}
}

func (t outputsTool) Call(_ context.Context, inv agent.Invocation) (string, error) {
	var in struct {
		N int `json:"n"`
	}
	if err := json.Unmarshal(inv.Args, &in); err != nil || in.N < 1 {
		return "", fmt.Errorf("want n of at least 1")
	}
	out, _, _ := scenarioOutput(in.N, t.meanKB)
	return out, nil
}

// checkSeen checks that each output reached the model with its first and last lines: the
// request after call n (request n+1, counting from 1) ends with that call's result.
func checkSeen(reqs []llmtest.Request, steps, meanKB int) error {
	for n := 1; n <= steps; n++ {
		if n >= len(reqs) {
			return fmt.Errorf("%d requests, want one after call %d", len(reqs), n)
		}
		msgs := reqs[n].Messages
		var result string
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == string(agent.RoleTool) {
				result = msgs[i].Content
				break
			}
		}
		_, first, last := scenarioOutput(n, meanKB)
		if !strings.Contains(result, first) || !strings.Contains(result, last) {
			return fmt.Errorf("request %d does not show call %d's result with its first line %q and its last line %q", n+1, n, first, last)
		}
	}
	return nil
}
