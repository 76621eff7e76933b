package discord

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
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

// TestE2EAutonomyCommand: through the fake Discord, an approver's
// /loopbot-autonomy level:careful is answered privately, and the next run's workspace write
// waits on an approval card whose reason names the level.
func TestE2EAutonomyCommand(t *testing.T) {
	note := &noteTool{}
	e := newE2E(t, bot.Config{EditInterval: agent.Duration(10 * time.Millisecond), Policy: bot.Policy{Approvers: []string{discordfake.UserID}}},
		llmtest.ToolCalls(llmtest.Call("note", `{"text":"hi"}`)), llmtest.Text("Wrote the note."))
	e.more = []agent.Tool{note}
	e.start(t)

	id, token := e.f.Interaction()
	e.f.Dispatch(t, "INTERACTION_CREATE", discordfake.SlashPayload(id, token, discordfake.Channel, "", "loopbot-autonomy",
		map[string]any{"name": "level", "type": 3, "value": "careful"}))
	reqs := e.f.WaitFor(t, "the autonomy answer", func(r []discordfake.Request) bool {
		return len(discordfake.Find(r, "PATCH", "/api/v9/webhooks/"+discordfake.AppID+"/"+token+"/messages/@original")) == 1
	})
	if edit := discordfake.Find(reqs, "PATCH", "/api/v9/webhooks/*/"+token+"/messages/@original")[0]; !strings.Contains(edit.Body["content"].(string), "now careful") {
		t.Errorf("autonomy answer %+v", edit.Body)
	}

	_, thread := e.slash(t, "write a note")
	waitUntil(t, "the approval card", func() bool {
		m, ok := e.card(thread, func(title string) bool { return title == "Approve note?" })
		return ok && strings.Contains(fmtJSON(m.Payload), "autonomy (careful)")
	})
	if n := note.calls.Load(); n != 0 {
		t.Errorf("the write ran %d times before an approval", n)
	}
}

func fmtJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
