package bot_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

func TestReadableArgs(t *testing.T) {
	tests := []struct {
		name, raw, want string
		n               int
	}{
		{"one line each, in order", `{"path":"a.md","recursive":true,"n":3}`, "path: a.md\nrecursive: true\nn: 3", 100},
		{"a text as a block", `{"path":"r.md","content":"# T\n\nbody\n"}`, "path: r.md\ncontent:\n  # T\n  \n  body", 100},
		{"nested values compact", `{"h":{"a": [1, 2]}}`, `h: {"a":[1,2]}`, 100},
		{"a compact value as sent", `{"h":[1,"a",{"b":null}],"n":-2.5e3}`, "h: [1,\"a\",{\"b\":null}]\nn: -2.5e3", 100},
		{"spaces in a nested string kept", `{"h": {"a": "x y"}}`, `h: {"a":"x y"}`, 100},
		{"not an object", `[1,2]`, `[1,2]`, 100},
		{"broken JSON as sent", `{"path":`, `{"path":`, 100},
		{"two objects as sent", `{} {}`, `{} {}`, 100},
		{"clipped", `{"q":"` + strings.Repeat("x", 50) + `"}`, "q: " + strings.Repeat("x", 14) + "…\n(cut)", 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bot.ReadableArgs(tt.raw, tt.n); got != tt.want {
				t.Errorf("ReadableArgs(%q) = %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}

// TestStatusCardShowsSteps runs two tool calls, one failing, and a write: the status card
// carries each call as a step (name, readable arguments, result or error, duration), not
// the loop's own update_plan, and the answer names the file written.
func TestStatusCardShowsSteps(t *testing.T) {
	bubble(t, func(t *testing.T) {
		look := &tool{name: "look", risk: agent.RiskSafe, out: "three files", delay: 2 * time.Second}
		write := &tool{name: "write_file", risk: agent.RiskSafe, out: "wrote 5 bytes"}
		h := newHarness(t, bot.Config{}, look, write)
		h.model.add(
			use("update_plan", `{"plan":[{"step":"look","status":"in_progress"}]}`),
			use("look", `{"q":"the docs"}`),
			use("nope", `{}`),
			use("write_file", `{"q":"x","path":"./out/report.md"}`),
			say("Done."),
		)
		h.mention(ann, "look around")
		h.settle()
		cards := h.plat.sent(bot.KindStatus)
		if len(cards) == 0 {
			t.Fatal("no status card")
		}
		steps := cards[len(cards)-1].msg.Steps
		var got []string
		for _, s := range steps {
			got = append(got, s.Tool+" "+string(s.Status))
		}
		if strings.Join(got, ", ") != "look done, nope failed, write_file done" {
			t.Fatalf("steps %q, want look, nope and write_file", got)
		}
		if s := steps[0]; s.Args != "q: the docs" || s.Result != "three files" || s.Duration != 2*time.Second || s.ID == "" {
			t.Errorf("look's step = %+v", s)
		}
		if s := steps[1]; !strings.Contains(s.Result, `unknown tool "nope"`) {
			t.Errorf("the failed step's result is %q, want its error", s.Result)
		}
		answers := h.plat.sent(bot.KindAnswer)
		if len(answers) != 1 {
			t.Fatalf("%d answers", len(answers))
		}
		a := answers[0].msg
		if strings.Join(a.Files, ",") != "out/report.md" || a.Workspace == "" || !strings.Contains(a.Footer, "Files written: out/report.md") {
			t.Errorf("the answer lists files %q in workspace %q with footer %q", a.Files, a.Workspace, a.Footer)
		}
	})
}

// previewing is a tool whose calls need approval and which previews them.
type previewing struct{ tool }

func (p *previewing) Preview(context.Context, agent.Invocation) (string, error) {
	return "--- r.md (now)\n+++ r.md (after this call)\n@@ -1 +1 @@\n-old\n+new", nil
}

// TestApprovalCardShowsChanges: the tool's preview of a call (write_file's diff) is on its
// approval card, after the risk and the reason.
func TestApprovalCardShowsChanges(t *testing.T) {
	bubble(t, func(t *testing.T) {
		w := &previewing{tool{name: "write_file", risk: agent.RiskConfirm, out: "ok"}}
		h := newHarness(t, bot.Config{}, w)
		h.model.add(use("write_file", `{"q":"x"}`), say("Done."))
		h.mention(ann, "write it")
		h.settle()
		cards := h.plat.sent(bot.KindApproval)
		if len(cards) == 0 {
			t.Fatal("no approval card")
		}
		var names []string
		for _, f := range cards[0].msg.Fields {
			names = append(names, f.Name)
		}
		fs := cards[0].msg.Fields
		if strings.Join(names, ",") != "Arguments,Risk,Why,Changes" || !fs[3].Code || !strings.Contains(fs[3].Value, "-old\n+new") {
			t.Errorf("the approval card's fields: %+v", fs)
		}
	})
}

// TestFailureNamesTheFilesWritten: a run cancelled after writing a file says so in its
// failure summary, as an answer would.
func TestFailureNamesTheFilesWritten(t *testing.T) {
	bubble(t, func(t *testing.T) {
		write := &tool{name: "write_file", risk: agent.RiskSafe, out: "wrote"}
		wait := &tool{name: "wait", risk: agent.RiskSafe, block: true}
		h := newHarness(t, bot.Config{}, write, wait)
		h.model.add(use("write_file", `{"path":"notes.md"}`), use("wait", `{}`))
		res := h.mention(ann, "write, then wait")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		h.click(ann, labelled(t, h.card("C1").Buttons, "Cancel").ID)
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCancelled)
		failures := h.plat.sent(bot.KindFailure)
		if len(failures) != 1 {
			t.Fatalf("%d failure messages", len(failures))
		}
		if m := failures[0].msg; strings.Join(m.Files, ",") != "notes.md" || m.Footer != "Files written: notes.md" {
			t.Errorf("the failure summary lists files %q, footer %q", m.Files, m.Footer)
		}
	})
}

// TestRunStepsKeepsTheNewest: a long run's card carries its newest steps and counts the
// rest; the loop's own tools are not steps; a long result is cut and says so.
func TestRunStepsKeepsTheNewest(t *testing.T) {
	st := &agent.State{}
	st.Calls = append(st.Calls, agent.CallRecord{ID: "plan", Name: "update_plan", Status: agent.CallSucceeded})
	for i := range bot.MaxSteps + 5 {
		st.Calls = append(st.Calls, agent.CallRecord{ID: fmt.Sprint("c", i), Name: "look", Status: agent.CallSucceeded, Output: strings.Repeat("x", 5000)})
	}
	steps, earlier := bot.RunSteps(st)
	if len(steps) != bot.MaxSteps || earlier != 5 || steps[0].ID != "c5" || steps[len(steps)-1].ID != fmt.Sprint("c", bot.MaxSteps+4) {
		t.Fatalf("%d steps from %s, %d earlier; want the newest %d and 5 earlier", len(steps), steps[0].ID, earlier, bot.MaxSteps)
	}
	if r := steps[0].Result; len(r) > 1300 || !strings.HasSuffix(r, "(cut)") {
		t.Errorf("a 5000-byte result is shown as %d bytes ending %q", len(r), r[len(r)-10:])
	}
}

// TestWrittenFiles lists each path write_file wrote once, cleaned, and none that would
// leave the workspace or that a failed call named.
func TestWrittenFiles(t *testing.T) {
	w := func(path string, status agent.CallStatus) agent.CallRecord {
		return agent.CallRecord{Name: "write_file", Arguments: fmt.Sprintf(`{"path":%q,"content":"x"}`, path), Status: status}
	}
	st := &agent.State{Calls: []agent.CallRecord{
		w("./a.md", agent.CallSucceeded), w("a.md", agent.CallSucceeded), w("docs//b.md", agent.CallSucceeded),
		w("../up.md", agent.CallSucceeded), w("/etc/passwd", agent.CallSucceeded), w(".", agent.CallSucceeded),
		w("failed.md", agent.CallFailed), w("asked.md", agent.CallAwaitingApproval),
		{Name: "read_file", Arguments: `{"path":"read.md"}`, Status: agent.CallSucceeded},
	}}
	if got := strings.Join(bot.WrittenFiles(st), ","); got != "a.md,docs/b.md" {
		t.Errorf("files written: %q, want a.md,docs/b.md", got)
	}
}

func TestStepsLine(t *testing.T) {
	m := bot.Message{EarlierSteps: 1, Steps: []bot.Step{
		{Tool: "a", Status: bot.StepDone, Duration: 500 * time.Microsecond},
		{Tool: "b", Status: bot.StepRejected},
		{Tool: "c", Status: bot.StepRunning, Duration: 90 * time.Second},
	}}
	if got, want := m.StepsLine(), "Tool calls: 1 earlier · ✓ a <1 ms · ⊘ b · ▸ c 1m30s"; got != want {
		t.Errorf("StepsLine() = %q, want %q", got, want)
	}
	if got := (bot.Message{}).StepsLine(); got != "" {
		t.Errorf("a card without steps: %q", got)
	}
}
