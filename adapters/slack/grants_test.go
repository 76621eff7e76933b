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

// TestGrantsCommand: "/loopbot grants" and "@loopbot grants" ask for the channel's grants;
// the slash command gets a root message to post them under.
func TestGrantsCommand(t *testing.T) {
	c, err := decodeCommand(slashCommand{TeamID: teamID, ChannelID: "C1", UserID: "U1", UserName: "ann", Command: "/loopbot",
		Text: "grants", TriggerID: "trig-g"}, "/loopbot")
	if err != nil || c.ev.Command != bot.CommandGrants || c.goal == "" || c.reply != "" || c.ev.Thread.Channel != "C1" {
		t.Fatalf("/loopbot grants: %+v, %v", c, err)
	}
	body, _ := json.Marshal(mentionCallback("Ev9", "C1", "1700000000.000100", "1700000005.000100", "<@"+botUserID+"> grants"))
	ev, ok, err := decodeEvent(body, identity{UserID: botUserID, TeamID: teamID})
	if err != nil || !ok || ev.Kind != bot.EventCommand || ev.Command != bot.CommandGrants || ev.Thread.Thread != "1700000005.000100" {
		t.Fatalf("@loopbot grants: %+v, %v, %v", ev, ok, err)
	}
}

// lintTool is a grantable tool that needs approval: its pattern is its command's first two
// words.
type lintTool struct{ calls atomic.Int32 }

func (l *lintTool) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "lint", Description: "runs a linter",
		Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}}
}

func (l *lintTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskConfirm, Reason: "runs a program"}
}

func (l *lintTool) Call(context.Context, agent.Invocation) (string, error) {
	l.calls.Add(1)
	return "no findings", nil
}

func (l *lintTool) GrantPattern(raw json.RawMessage) (string, bool) {
	var a struct{ Command string }
	if json.Unmarshal(raw, &a) != nil || len(strings.Fields(a.Command)) < 2 {
		return "", false
	}
	return strings.Join(strings.Fields(a.Command)[:2], " "), true
}

func (l *lintTool) GrantCovers(pattern string, raw json.RawMessage) bool {
	p, ok := l.GrantPattern(raw)
	return ok && p == pattern
}

// TestE2EAlwaysAllowAndRevoke: through Socket Mode, the real bot and store, an approver's
// Always allow here lets the next run's matching call run unasked; @loopbot grants lists
// the grant with a Revoke button, which the approver presses.
func TestE2EAlwaysAllowAndRevoke(t *testing.T) {
	lint := &lintTool{}
	e := newE2EWith(t, bot.Config{Policy: bot.Policy{Approvers: []string{"U7"}}}, []agent.Tool{lint},
		llmtest.ToolCalls(llmtest.Call("lint", `{"command":"make lint"}`)), llmtest.Text("Lint is clean."),
		llmtest.ToolCalls(llmtest.Call("lint", `{"command":"make lint ./pkg"}`)), llmtest.Text("Still clean."))
	e.mention("env-1", "Ev1", "lint the repo")
	e.handled()
	post := e.log.waitCall(t, "the approval card", 1, "chat.postMessage", approvalCard)
	if !blocksHave("make lint")(post) {
		t.Errorf("the card does not show the pattern Always allow here grants: %s", post.Values.Get("blocks"))
	}
	e.click("env-a", "trig-a", "U7", "boss", post.TS, buttonValue(t, post, "Always allow here"))
	if h := e.handled(); h.res.Notice != "" {
		t.Fatalf("always: %+v", h.res)
	}
	e.log.waitCall(t, "the first answer", 1, "chat.postMessage", and(answer, blocksHave("Lint is clean.")))

	e.mention("env-2", "Ev2", "lint it again")
	e.handled()
	e.log.waitCall(t, "the second answer", 1, "chat.postMessage", and(answer, blocksHave("Still clean.")))
	if n := len(e.log.of("chat.postMessage", approvalCard)); n != 1 || lint.calls.Load() != 2 {
		t.Fatalf("%d approval cards and %d calls, want the second call to run under the grant", n, lint.calls.Load())
	}

	e.mention("env-3", "Ev3", "grants")
	e.handled()
	list := e.log.waitCall(t, "the grant list", 1, "chat.postMessage", blocksHave("Grants in this channel"))
	e.click("env-r", "trig-r", "U7", "boss", list.TS, buttonValue(t, list, "Revoke lint make lint"))
	if h := e.handled(); h.res.Notice != "Revoked." {
		t.Fatalf("revoke: %+v", h.res)
	}
	e.view(func(tx bot.Tx) error {
		gs, err := tx.Grants(bot.ThreadRef{Platform: platform, Workspace: teamID, Channel: "C1"}.ChannelKey())
		if len(gs) != 0 {
			t.Errorf("grants after the revoke: %+v", gs)
		}
		return err
	})
}
