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
// with the planner's review. `loopbot runs show` then prints the conversation. A second goal,
// which the planner finds needs no plan, runs unplanned.
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
		case r.ResponseFormat == "json_object" && strings.Contains(last.Content, "Goal: say hello"):
			return llmtest.Text(`{"needs_plan": false, "reason": "one reply"}`)
		case r.ResponseFormat == "json_object":
			return llmtest.Text(plan)
		case strings.Contains(r.Messages[len(r.Messages)-1].Content, "say hello"):
			return llmtest.Text("Hello!")
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
	// With planning auto, a goal the planner finds needs no plan runs as an unplanned run.
	const hello = "say hello"
	other := c.post("/api/threads", map[string]string{"id": uuid(3), "user": "ann", "text": hello})["thread"].(string)
	c.waitFor(other, regexp.MustCompile(`Hello!`))
	shownOther := c.threadText(other)
	p.terminate(25 * time.Second)

	runs := invariants{db: s.db, goals: []string{goal, hello}, shown: []string{shown, shownOther}, logs: logs.String(), settled: true}.check(t)
	if len(runs) != 2 || runs[0].Status != agent.StatusCompleted || runs[1].Status != agent.StatusCompleted {
		t.Fatalf("runs = %+v, want two completed", runs)
	}
	if runs[0].State.Goal == hello {
		runs[0], runs[1] = runs[1], runs[0]
	}
	if pl := runs[1].State.Planning; pl == nil || !pl.Decided || len(pl.Steps) != 0 || runs[1].State.Answer != "Hello!" {
		t.Fatalf("the hello run: planning %+v, answer %q; want decided without a plan", pl, runs[1].State.Answer)
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
