package slack

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// noteTool is a cautious workspace write, which balanced runs unasked and careful asks about.
type noteTool struct{ calls atomic.Int32 }

func (n *noteTool) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "note", Description: "writes a note",
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}}
}

func (n *noteTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskCautious, Reason: "writes a file of the workspace"}
}

func (n *noteTool) Call(context.Context, agent.Invocation) (string, error) {
	n.calls.Add(1)
	return "written", nil
}

// TestE2EAutonomySlashCommand: through the fake Slack, an approver's
// "/loopbot autonomy careful" is answered through the command's response_url, and the next
// run's workspace write waits on an approval card whose reason names the level.
func TestE2EAutonomySlashCommand(t *testing.T) {
	note := &noteTool{}
	e := newE2EWith(t, bot.Config{Policy: bot.Policy{Approvers: []string{"U1"}}}, []agent.Tool{note},
		llmtest.ToolCalls(llmtest.Call("note", `{"text":"hi"}`)), llmtest.Text("Wrote the note."))
	e.f.send("slash_commands", "env-autonomy", map[string]any{"token": "x", "team_id": teamID, "channel_id": "C1",
		"user_id": "U1", "user_name": "ann", "command": "/loopbot", "text": "autonomy careful", "trigger_id": "trig-a",
		"response_url": e.f.apiURL() + "response_url"})
	e.f.nextAck()
	if h := e.handled(); h.ev.Command != bot.CommandAutonomy || !strings.Contains(h.res.Notice, "now careful") {
		t.Fatalf("autonomy command handled as %+v", h)
	}
	if c := e.f.nextCall("response_url"); !strings.Contains(c.Values.Get("body"), "now careful") {
		t.Errorf("response_url body %s", c.Values.Get("body"))
	}

	e.mention("env-1", "Ev1", "write a note")
	e.handled()
	card := e.log.waitCall(t, "the approval card", 1, "chat.postMessage", approvalCard)
	if !strings.Contains(card.Values.Get("blocks"), "autonomy (careful)") {
		t.Errorf("approval card does not say the level asked: %s", card.Values.Get("blocks"))
	}
	if n := note.calls.Load(); n != 0 {
		t.Errorf("the write ran %d times before an approval", n)
	}
}
