package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/tools"
	"github.com/loopbot/loopbot/bot"
)

// TestDemoRun plays the demo script through the real loop and the real file tools: the planner
// plans three steps, an executor lists the workspace, another asks the planner where the
// report goes and waits for approval of write_file, and the last answers.
func TestDemoRun(t *testing.T) {
	for _, approve := range []bool{true, false} {
		t.Run(map[bool]string{true: "approved", false: "rejected"}[approve], func(t *testing.T) {
			set, err := tools.Build(context.Background(), tools.Config{Workspace: filepath.Join(t.TempDir(), "ws"), Files: tools.FilesConfig{Enabled: true}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			ag, err := agent.New(demoAgentConfig(agent.Config{}), demoModel{}, set.Tools())
			if err != nil {
				t.Fatal(err)
			}
			st := agent.NewState("demo-run", "tidy up the release notes", nil, time.Now())
			ctx := context.Background()
			if err := ag.Run(ctx, st, agent.Hooks{}); err != nil {
				t.Fatal(err)
			}
			if st.Status != agent.StatusAwaitingApproval {
				t.Fatalf("status = %s, want awaiting_approval", st.Status)
			}
			p := st.PendingApprovals()
			if len(p) != 1 || p[0].Name != "write_file" {
				t.Fatalf("pending = %+v", p)
			}
			// The card says what raised the call: demo mode, not a config there is none of.
			if r := p[0].RiskReason; !strings.Contains(r, "demo mode") || strings.Contains(r, "config") {
				t.Errorf("the approval's reason is %q, want it to name demo mode", r)
			}
			if err := st.Decide(p[0].ID, agent.Decision{Approved: approve, By: "web:ann"}); err != nil {
				t.Fatal(err)
			}
			if err := ag.Run(ctx, st, agent.Hooks{}); err != nil {
				t.Fatal(err)
			}
			if st.Status != agent.StatusCompleted {
				t.Fatalf("status = %s (%s)", st.Status, st.Error)
			}
			want := "wrote **report.md**"
			if !approve {
				want = "you rejected writing"
			}
			if !strings.Contains(st.Answer, want) {
				t.Errorf("answer = %q, want it to say %q", st.Answer, want)
			}
			if len(st.Plan) != 3 || st.Plan[2].Status != agent.PlanDone {
				t.Errorf("plan = %+v", st.Plan)
			}
			q, a := st.Planning.LastQuestion()
			if q == nil || a == nil || q.From != "executor s2" || a.From != "planner" || !strings.Contains(a.Text, "report.md") {
				t.Errorf("question %+v, answer %+v: want s2's question answered by the planner", q, a)
			}
			// runs show prints the conversation with the message types.
			var out strings.Builder
			if err := writeTranscript(&out, &bot.RunRecord{ID: st.RunID, State: st}, nil, bot.NewRedactor(nil)); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"Plan step s2 [done] Write a short report (after s1)  scope: full",
				"[task_assignment] planner -> executor s1", "[question] executor s2 -> planner: Which file should the report go to?",
				"[clarification] planner -> executor s2: Write it to report.md", "[task_complete] executor s3 -> planner",
				"verdict: accept", "write_file("} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("runs show lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}
