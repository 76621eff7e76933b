package bot_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// A completed run's answer has Save as playbook; only an approver may press it, and it
// writes a draft from the run's goal, plan and the tools it used to the drafts directory,
// where nothing runs it until an approver names it and moves it up.
func TestSaveAsPlaybook(t *testing.T) {
	bubble(t, func(t *testing.T) {
		dir := t.TempDir()
		fetch := &tool{name: "fetch", risk: agent.RiskSafe, out: "3 open issues"}
		h := newHarness(t, bot.Config{Playbooks: bot.PlaybookConfig{Dir: dir}, Policy: bot.Policy{Approvers: []string{boss.ID}}}, fetch)
		h.model.add(
			use("update_plan", `{"plan":[{"step":"List the open issues","status":"in_progress"},{"step":"Summarise {{them}}","status":"pending"}]}`),
			use("fetch", `{"q":"issues"}`),
			say("There are 3 open issues."))
		res := h.mention(ann, "summarise the open issues")
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		answers := h.plat.sent(bot.KindAnswer)
		if len(answers) != 1 {
			t.Fatalf("%d answers posted", len(answers))
		}
		// The answer's rating buttons come first (bot/feedback.go), Save as playbook last.
		bs := h.plat.shown(answers[0].ref.ID).Buttons
		if len(bs) != 3 || bs[2].Label != "Save as playbook" {
			t.Fatalf("answer buttons = %+v, want the ratings and Save as playbook", bs)
		}
		bs = bs[2:]
		if got := h.click(ann, bs[0].ID); got.Notice != "Only loopbot's approvers can save a run as a playbook." {
			t.Fatalf("the requester saving = %+v, want refused", got)
		}
		if _, err := os.Stat(filepath.Join(dir, "drafts")); !os.IsNotExist(err) {
			t.Fatalf("a refused click wrote something: %v", err)
		}
		got := h.click(boss, bs[0].ID)
		if !strings.HasPrefix(got.Notice, "Saved as drafts/draft-") {
			t.Fatalf("an approver saving = %+v", got)
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(got.Notice, "Saved as "), ".")
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(rel), ".md")
		pb, err := bot.ParsePlaybook(filepath.Join(dir, rel), data, []string{"fetch"})
		if err != nil {
			t.Fatalf("the draft does not parse: %v\n%s", err, data)
		}
		if pb.Name != name || pb.Description != "summarise the open issues" ||
			!slices.Equal(pb.Steps, []string{"List the open issues", "Summarise { {them}}"}) || !slices.Equal(pb.Tools, []string{"fetch"}) {
			t.Fatalf("draft = %+v\n%s", pb, data)
		}
		if again := h.click(boss, bs[0].ID); again.Notice != "Already saved as "+rel+"." {
			t.Fatalf("saving twice = %+v", again)
		}
		h.settle()
		if !strings.Contains(h.plat.allText(), "boss saved this run as a draft playbook, "+rel) {
			t.Fatalf("the thread was not told:\n%s", h.plat.allText())
		}
		// A draft is not a playbook until it is moved up.
		if list := h.mention(ann, "playbooks"); strings.Contains(list.Notice, name) {
			t.Fatalf("a draft is listed: %q", list.Notice)
		}
		if r := h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandStart, User: ann, Text: "run " + name}); r.RunID != "" {
			t.Fatal("a draft ran")
		}
		active := strings.Replace(string(data), "name: "+name, "name: issue-summary", 1)
		writePlaybook(t, dir, "issue-summary", active)
		h.model.add(say("still 3"))
		other := thread
		other.Thread = "T2"
		r := h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandStart, Thread: other, User: ann, Text: "run issue-summary"})
		h.settle()
		h.wantStatus(r.RunID, agent.StatusCompleted)
	})
}

// toolNameRE is what a model provider accepts as a tool's name.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// FuzzDraftPlaybook: a draft written from any run's goal and plan parses as a playbook, so
// an approver can always activate what Save as playbook wrote.
func FuzzDraftPlaybook(f *testing.F) {
	f.Add("summarise the open issues", "List them", "fetch")
	f.Add("---\nname: evil\n---\n{{x}}", "step {{y}}", "shell")
	f.Add("a: b\n- c", "\"quoted\" 'step'", "")
	f.Fuzz(func(t *testing.T, goal, step, toolName string) {
		if strings.TrimSpace(goal) == "" || !utf8.ValidString(goal) || !utf8.ValidString(step) || !utf8.ValidString(toolName) {
			t.Skip()
		}
		st := agent.NewState("r1", goal, nil, time.Time{})
		if strings.TrimSpace(step) != "" {
			st.Plan = []agent.PlanItem{{Step: step, Status: agent.PlanDone}}
		}
		if toolName != "" {
			if !toolNameRE.MatchString(toolName) {
				t.Skip() // tool names are what the agent's registry holds
			}
			st.Calls = []agent.CallRecord{{ID: "c1", Name: toolName, Status: agent.CallSucceeded}}
		}
		text, err := bot.DraftPlaybook("draft-r1", st)
		if err != nil {
			t.Fatal(err)
		}
		pb, err := bot.ParsePlaybook("drafts/draft-r1.md", text, []string{toolName})
		if err != nil {
			t.Fatalf("the draft does not parse: %v\n%s", err, text)
		}
		if pb.Name != "draft-r1" {
			t.Fatalf("draft named %q", pb.Name)
		}
	})
}
