package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/tools"
)

// TestDemoRun plays the demo script through the real loop and the real file tools: it plans,
// lists the workspace, waits for approval of write_file, and answers.
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
		})
	}
}
