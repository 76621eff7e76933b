package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// The tool fault tests give the real binary's tools what a careless or hostile model would:
// a named pipe to read, a command that fills the disk.

// scriptedTools answers each goal with its list of tool calls, one a step, then with
// "Finished <goal>." once they have all returned.
func scriptedTools(calls map[string][]llmtest.ToolCall) llmtest.Step {
	return llmtest.Func(func(r llmtest.Request) llmtest.Step {
		goal, results := "", 0
		for _, m := range r.Messages {
			switch {
			case m.Role == "user" && goal == "":
				goal = m.Content
			case m.Role == "tool":
				results++
			}
		}
		for g, cs := range calls {
			if strings.Contains(goal, g) && results < len(cs) {
				return llmtest.ToolCalls(cs[results])
			}
		}
		return llmtest.Text("Finished " + goal + ".")
	})
}

// toolResults returns what the model was told of the calls to a tool.
func toolResults(model *llmtest.Server) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			if m.Role == "tool" && !seen[m.ToolCallID] {
				seen[m.ToolCallID] = true
				out = append(out, m.Content)
			}
		}
	}
	return out
}

// processesWith returns the processes whose command line mentions token.
func processesWith(token string) map[int]string {
	out := map[int]string{}
	for pid, p := range procTable() {
		if strings.Contains(p.cmdline, token) {
			out[pid] = p.cmdline
		}
	}
	return out
}

// approveAll approves the shell calls of a thread as they come, until its answer shows.
func approveAll(t *testing.T, c consoleClient, thread, user string, calls int, done *regexp.Regexp) {
	t.Helper()
	for i := range calls {
		if n := c.press(thread, c.waitFor(thread, approveButton)[1], user, 100*(i+1)); n != "" {
			t.Fatalf("approving call %d was refused: %q", i+1, n)
		}
		// The next card replaces this one; wait for the call to be decided before looking
		// for its button.
		awaitCond(t, fmt.Sprintf("call %d runs", i+1), 30*time.Second, func() bool {
			text := c.threadText(thread)
			return strings.Count(text, "Approved") >= i+1 || done.MatchString(text)
		}, func() string { return c.threadText(thread) })
	}
	c.waitFor(thread, done)
}

// TestFaultReadFileOnFIFO makes a named pipe in the workspace and has the model read it: the
// call ends at once with a clear error instead of blocking the run forever. A run whose shell
// command would block is cancelled from the console and ends, and the daemon stops and starts
// again without hanging on either.
func TestFaultReadFileOnFIFO(t *testing.T) {
	bin := loopbotBinary(t)
	model := llmtest.NewTest(t)
	model.SetFallback(scriptedTools(map[string][]llmtest.ToolCall{
		"read the pipe": {llmtest.Call("shell", `{"command":"mkfifo p"}`), llmtest.Call("read_file", `{"path":"p"}`)},
		"wait on the pipe": {
			llmtest.Call("shell", `{"command":"mkfifo q; cat q # fifo-token-8817"}`),
		},
	}))
	s := newFaultSetup(t, model, fastEdits+"[tools.files]\nenabled = true\n[agent.risk]\nshell = \"confirm\"\n")
	enableShell(t, &s)
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)

	goals := []string{"read the pipe", "wait on the pipe", "say hello"}
	read := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": goals[0]})["thread"].(string)
	approveAll(t, c, read, "ann", 1, regexp.MustCompile(`Finished read the pipe\.`))
	var fifoErr string
	for _, res := range toolResults(model) {
		if strings.Contains(res, "named pipe") {
			fifoErr = res
		}
	}
	if !strings.Contains(fifoErr, `"p" is a named pipe (FIFO)`) {
		t.Errorf("the model was not told the path is a named pipe: %q", toolResults(model))
	}

	wait := c.post("/api/threads", map[string]string{"id": uuid(2), "user": "ann", "text": goals[1]})["thread"].(string)
	if n := c.press(wait, c.waitFor(wait, approveButton)[1], "ann", 3); n != "" {
		t.Fatalf("approving the blocking command was refused: %q", n)
	}
	var sandbox map[int]string
	awaitCond(t, "the blocking command runs", 30*time.Second, func() bool {
		sandbox = descendants(p.cmd.Process.Pid)
		for _, cmd := range sandbox {
			if strings.Contains(cmd, "fifo-token-8817") && strings.HasPrefix(cmd, "/bin/sh") {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprint(descendants(p.cmd.Process.Pid)) })
	if n := c.press(wait, c.waitFor(wait, cancelButton)[1], "ann", 4); n != "" && !strings.Contains(n, "Cancelling") {
		t.Fatalf("Cancel was refused: %q", n)
	}
	awaitCond(t, "the run shows as cancelled", 30*time.Second, func() bool { return strings.Contains(c.threadText(wait), "Cancelled") },
		func() string {
			return c.threadText(wait) + "\nprocesses: " + fmt.Sprint(stillAlive(sandbox)) + "\nlogs:\n" + logs.String()
		})
	awaitCond(t, "the cancelled command's processes end", 10*time.Second, func() bool { return len(stillAlive(sandbox)) == 0 },
		func() string { return fmt.Sprint(stillAlive(sandbox)) })

	// The console keeps its threads in memory; what they showed is taken before the stop.
	shown := []string{c.threadText(read), c.threadText(wait)}
	if took := p.terminate(25 * time.Second); took > 20*time.Second {
		t.Errorf("stopping took %s", took)
	}
	p = startLoopbot(t, bin, s.config, s.env, logs)
	hello := c.post("/api/threads", map[string]string{"id": uuid(5), "user": "ann", "text": goals[2]})["thread"].(string)
	c.waitFor(hello, regexp.MustCompile(`Finished say hello\.`))
	shown = append(shown, c.threadText(hello))
	p.terminate(25 * time.Second)

	runs := invariants{db: s.db, goals: goals, shown: shown, logs: logs.String(), settled: true}.check(t)
	status := map[string]agent.Status{}
	for _, r := range runs {
		status[r.State.Goal] = r.Status
	}
	want := map[string]agent.Status{goals[0]: agent.StatusCompleted, goals[1]: agent.StatusCancelled, goals[2]: agent.StatusCompleted}
	for g, st := range want {
		if status[g] != st {
			t.Errorf("run %q is %s, want %s", g, status[g], st)
		}
	}
}

// TestFaultShellResourceLimits has the model write past the file size limit and then fill
// the workspace past its limit: each call ends with an error naming the limit, and the bot
// keeps serving.
func TestFaultShellResourceLimits(t *testing.T) {
	bin := loopbotBinary(t)
	model := llmtest.NewTest(t)
	model.SetFallback(scriptedTools(map[string][]llmtest.ToolCall{
		"fill the disk": {
			llmtest.Call("shell", `{"command":"head -c 3000000 /dev/zero > big"}`),
			llmtest.Call("shell", `{"command":"rm big; for f in a b c d; do head -c 900000 /dev/urandom > $f; done; exec sleep 60 # limit-token-4127"}`),
		},
	}))
	s := newFaultSetup(t, model, fastEdits+"[tools.limits]\nfile_size_mib = 1\nworkspace_mib = 2\n[agent.risk]\nshell = \"confirm\"\n")
	enableShell(t, &s)
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)

	goals := []string{"fill the disk", "say hello"}
	fill := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": goals[0]})["thread"].(string)
	approveAll(t, c, fill, "ann", 2, regexp.MustCompile(`Finished fill the disk\.`))
	results := toolResults(model)
	if len(results) != 2 || !strings.Contains(results[0], "tools.limits.file_size_mib") ||
		!strings.Contains(results[1], "tools.limits.workspace_mib") || !strings.Contains(results[1], "killed") {
		t.Errorf("the model was not told which limits were hit: %q", results)
	}
	awaitCond(t, "the killed command's processes end", 10*time.Second, func() bool { return len(processesWith("limit-token-4127")) == 0 },
		func() string { return fmt.Sprint(processesWith("limit-token-4127")) })

	hello := c.post("/api/threads", map[string]string{"id": uuid(2), "user": "ann", "text": goals[1]})["thread"].(string)
	c.waitFor(hello, regexp.MustCompile(`Finished say hello\.`))
	shown := []string{c.threadText(fill), c.threadText(hello)}
	p.terminate(25 * time.Second)
	runs := invariants{db: s.db, goals: goals, shown: shown, logs: logs.String(), settled: true}.check(t)
	for _, r := range runs {
		if r.Status != agent.StatusCompleted {
			t.Errorf("run %q is %s, want completed", r.State.Goal, r.Status)
		}
	}
}
