package main

import (
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

func TestWriteTranscript(t *testing.T) {
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	st := agent.NewState("r1", "clean the tmp dir", nil, now)
	st.Status = agent.StatusCompleted
	st.Step = 2
	st.Plan = []agent.PlanItem{{Step: "list", Status: agent.PlanDone}, {Step: "delete", Status: agent.PlanDone}}
	st.Calls = []agent.CallRecord{
		{ID: "c1", Step: 1, Name: "list_files", Arguments: `{"path":"."}`, Risk: agent.RiskSafe, Status: agent.CallSucceeded, Output: "a\nb"},
		{ID: "c2", Step: 2, Name: "shell", Arguments: `{"command":"rm -rf tmp"}`, Risk: agent.RiskDangerous, RiskReason: "recursive delete",
			Status: agent.CallSucceeded, Decision: &agent.Decision{Approved: true, By: "U2", At: now}},
	}
	st.Answer = "Deleted tmp."
	rec := &bot.RunRecord{ID: "r1", Thread: bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1.2"}, Requester: bot.User{ID: "U1", Name: "ann"},
		Status: st.Status, State: st, CreatedAt: now}
	audit := []bot.AuditEntry{{At: now, Actor: bot.User{ID: "U2", Name: "bob"}, Action: "approve", Tool: "shell", ArgsHash: "0123456789abcdef"}}
	var b strings.Builder
	if err := writeTranscript(&b, rec, audit); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Run r1  (completed)", "Goal:      clean the tmp dir", "[x] list", "Step 2", `shell({"command":"rm -rf tmp"})`,
		"risk: dangerous: recursive delete", "approved by U2", "approve by bob (U2)  shell args sha256:0123456789ab", "Answer:\nDeleted tmp."} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("transcript lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := writeRuns(&b, []*bot.RunRecord{rec}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "r1") || !strings.Contains(b.String(), "completed") || !strings.Contains(b.String(), "clean the tmp dir") {
		t.Errorf("run list:\n%s", b.String())
	}
}
