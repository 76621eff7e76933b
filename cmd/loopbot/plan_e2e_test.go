package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// TestPlannedQuestionToPersonInThread runs a planned run through the real binary, store and
// console: an executor asks a question the planner passes on to the person, the question is
// posted in the thread, the person's reply there reaches the executor, and the run finishes
// with the planner's review. `loopbot runs show` then prints the conversation.
func TestPlannedQuestionToPersonInThread(t *testing.T) {
	bin := loopbotBinary(t)
	plan := `{"needs_plan": true, "steps": [{"id": "s1", "description": "book the table", "scope": "full"}]}`
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		last := r.LastMessage()
		switch {
		case r.ResponseFormat == "json_object" && strings.Contains(last.Content, " asks: "):
			return llmtest.Text(`{"escalate": true}`)
		case r.ResponseFormat == "json_object" && strings.Contains(last.Content, " reports: "):
			return llmtest.Text(`{"verdict": "accept", "reason": "booked"}`)
		case r.ResponseFormat == "json_object":
			return llmtest.Text(plan)
		case last.Role == "tool" && strings.Contains(last.Content, "answered: Friday"):
			return llmtest.Text("Booked the table for Friday.")
		}
		return llmtest.ToolCalls(llmtest.Call("ask_planner", `{"question":"Which evening suits the team?"}`))
	}))
	s := newFaultSetup(t, model, fastEdits+"[agent]\nplanning = \"auto\"\n")
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)
	const goal = "book a team dinner"
	thread := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": goal})["thread"].(string)
	c.waitFor(thread, regexp.MustCompile(`Which evening suits the team\?`))
	c.post("/api/threads/"+thread+"/messages", map[string]string{"id": uuid(2), "user": "ann", "text": "Friday"})
	c.waitFor(thread, regexp.MustCompile(`Booked the table for Friday\.`))
	shown := c.threadText(thread)
	p.terminate(25 * time.Second)

	runs := invariants{db: s.db, goals: []string{goal}, shown: []string{shown}, logs: logs.String(), settled: true}.check(t)
	if len(runs) != 1 || runs[0].Status != agent.StatusCompleted {
		t.Fatalf("runs = %+v, want one completed", runs)
	}
	q, a := runs[0].State.Planning.LastQuestion()
	if q == nil || a == nil || q.From != "executor s1" || !strings.HasPrefix(a.From, "person ") || a.Text != "Friday" {
		t.Fatalf("question %+v, answer %+v: want s1's question answered by the person", q, a)
	}
	if !strings.Contains(shown, "Question from executor s1") {
		t.Errorf("the status card does not show the executor's question:\n%s", shown)
	}
	raw, err := exec.Command(bin, "-config", s.config, "runs", "show", runs[0].ID).CombinedOutput()
	if err != nil {
		t.Fatalf("runs show: %v\n%s", err, raw)
	}
	out := string(raw)
	for _, want := range []string{"[question] executor s1 -> planner: Which evening suits the team?",
		"[question] planner -> person: Which evening suits the team?", "[clarification] person ", "-> executor s1: Friday"} {
		if !strings.Contains(out, want) {
			t.Errorf("runs show lacks %q:\n%s", want, out)
		}
	}
}
