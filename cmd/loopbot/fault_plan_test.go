package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// TestFaultKill9MidPlanStep SIGKILLs the daemon in the middle of a plan step: the executor of
// the second step runs an approved shell command when the process dies. The restarted daemon
// takes the planned run up from the store where the executor's sub-run was checkpointed: the
// first step stays done, the second step's call is not run again (its outcome is unknown and
// the executor is told so), and the planner reviews the executor's result as usual.
func TestFaultKill9MidPlanStep(t *testing.T) {
	bin := loopbotBinary(t)
	const command = "echo start >> ran.txt; sleep 30; echo end >> ran.txt"
	const answer = "The outcome of the command is unknown, so I did not run it again."
	plan := `{"needs_plan": true, "steps": [` +
		`{"id": "s1", "description": "check the workspace", "scope": "read_only"},` +
		`{"id": "s2", "description": "run the slow command", "depends_on": ["s1"], "scope": "full"}]}`
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		last := r.LastMessage()
		switch {
		case r.ResponseFormat == "json_object" && strings.Contains(last.Content, " reports: "):
			return llmtest.Text(`{"verdict": "accept", "reason": "done"}`)
		case r.ResponseFormat == "json_object":
			return llmtest.Text(plan)
		case strings.Contains(r.Messages[1].Content, "Your step (s1)"):
			return llmtest.Text("The workspace is ready.")
		case last.Role == "tool":
			return llmtest.Text(answer)
		}
		return llmtest.ToolCalls(llmtest.Call("shell", fmt.Sprintf(`{"command":%q}`, command)))
	}))
	s := newFaultSetup(t, model, fastEdits+"[agent]\nplanning = \"always\"\n")
	enableShell(t, &s)
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)
	const goal = "check the workspace, then run the slow recorded command"
	thread := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": goal})["thread"].(string)
	ran := approveSlowCommand(t, s, c, thread)
	p.kill()

	p = startLoopbot(t, bin, s.config, s.env, logs)
	c.waitFor(thread, regexp.MustCompile(regexp.QuoteMeta(answer)))
	shown := c.threadText(thread)
	p.terminate(25 * time.Second)

	runs := invariants{db: s.db, goals: []string{goal}, shown: []string{shown}, logs: logs.String(), settled: true}.check(t)
	if len(runs) != 1 || runs[0].Status != agent.StatusCompleted {
		t.Fatalf("runs = %+v, want one completed", runs)
	}
	pl := runs[0].State.Planning
	if pl == nil || len(pl.Steps) != 2 || pl.Steps[0].Status != agent.PlanDone || pl.Steps[1].Status != agent.PlanDone {
		t.Fatalf("planning = %+v, want both steps done", pl)
	}
	calls := pl.Steps[1].Sub.Calls
	if len(calls) != 1 || calls[0].Name != "shell" || calls[0].Status != agent.CallUnknown || calls[0].Attempts != 1 {
		t.Errorf("s2's calls = %+v, want the one shell call with an unknown outcome after one attempt", calls)
	}
	if pl.Steps[0].Attempts != 1 || pl.Steps[1].Attempts != 1 {
		t.Errorf("attempts %d and %d, want each step worked on once", pl.Steps[0].Attempts, pl.Steps[1].Attempts)
	}
	if !strings.Contains(shown, "loopbot stopped while") {
		t.Errorf("the thread was not told the step's command has an unknown outcome:\n%s", shown)
	}
	if b, err := os.ReadFile(ran); err != nil || string(b) != "start\n" {
		t.Errorf("ran.txt = %q, %v; want the one start of the one run, and no end", b, err)
	}
}
