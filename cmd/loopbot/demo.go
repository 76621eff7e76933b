package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// Demo mode: with no model configured, loopbot plays a short, realistic run with a scripted
// model, so the whole flow (plan, a safe tool, a call that needs approval, the answer) can be
// seen with no credentials at all. The script reads the conversation it is sent and answers
// the next move, so any number of demo runs, in any thread, work.

// demoAgentConfig makes write_file need an approval in the demo, so the demo shows the
// Approve and Reject buttons.
func demoAgentConfig(c agent.Config) agent.Config {
	floor := map[string]agent.Risk{"write_file": agent.RiskConfirm}
	why := map[string]string{"write_file": "demo mode asks before every file write, to show an approval"}
	for k, v := range c.RiskFloorReason {
		why[k] = v
	}
	// A floor the config file set is the config's, and the card says so.
	for k, v := range c.RiskFloor {
		floor[k] = v
		delete(why, k)
	}
	c.RiskFloor, c.RiskFloorReason = floor, why
	return c
}

// demoMove is the scripted model's next reply: text, or one tool call.
type demoMove struct {
	Text string
	Call *agent.ToolCall
}

func demoPlan(statuses ...string) *agent.ToolCall {
	steps := []string{"Look at the workspace", "Write a short report", "Tell you what I did"}
	type item struct {
		Step   string `json:"step"`
		Status string `json:"status"`
	}
	var plan []item
	for i, s := range steps {
		plan = append(plan, item{s, statuses[i]})
	}
	b, _ := json.Marshal(map[string]any{"plan": plan})
	return &agent.ToolCall{Name: "update_plan", Arguments: string(b)}
}

// demoNext decides the scripted model's reply from the messages it was sent.
func demoNext(msgs []agent.Message, withTools bool) demoMove {
	var goal string
	var results []agent.Message
	for _, m := range msgs {
		switch m.Role {
		case agent.RoleUser:
			if goal == "" || len(results) == 0 {
				goal = m.Content
			}
		case agent.RoleTool:
			results = append(results, m)
		}
	}
	if !withTools {
		return demoMove{Text: "This demo run stopped at its budget. Nothing else is left to do."}
	}
	last := func(name string) (agent.Message, bool) {
		for i := len(results) - 1; i >= 0; i-- {
			if results[i].Name == name {
				return results[i], true
			}
		}
		return agent.Message{}, false
	}
	written, wroteDone := last("write_file")
	_, listed := last("list_files")
	switch {
	case !listed && len(results) == 0:
		return demoMove{Call: demoPlan("in_progress", "pending", "pending")}
	case !listed:
		return demoMove{Call: &agent.ToolCall{Name: "list_files", Arguments: `{"path":"."}`}}
	case !wroteDone && !hasResult(results, "Plan updated", 2):
		return demoMove{Call: demoPlan("done", "in_progress", "pending")}
	case !wroteDone:
		report := "# Demo report\n\nGoal: " + oneLine(goal, 200) + "\n\nThis file was written by loopbot's demo mode after you approved it.\n"
		b, _ := json.Marshal(map[string]string{"path": "report.md", "content": report})
		return demoMove{Call: &agent.ToolCall{Name: "write_file", Arguments: string(b)}}
	case !hasResult(results, "Plan updated", 3):
		if strings.HasPrefix(written.Content, "Error") || strings.Contains(written.Content, "rejected") {
			return demoMove{Call: demoPlan("done", "failed", "done")}
		}
		return demoMove{Call: demoPlan("done", "done", "done")}
	}
	if strings.Contains(written.Content, "rejected") {
		return demoMove{Text: "I looked at the workspace, but you rejected writing `report.md`, so I left it unchanged. " +
			"Nothing else was done. (This is loopbot's demo mode: a scripted model played this run.)"}
	}
	if strings.HasPrefix(written.Content, "Error") {
		return demoMove{Text: "I looked at the workspace, but writing `report.md` failed: " + oneLine(written.Content, 200)}
	}
	return demoMove{Text: "Done. I looked at the workspace and wrote **report.md** with a short report on your goal:\n\n> " +
		oneLine(goal, 200) + "\n\n(This is loopbot's demo mode: a scripted model played this run. Configure `[llm]` or OPENAI_API_KEY for a real one.)"}
}

// hasResult reports whether at least n tool results contain s.
func hasResult(results []agent.Message, s string, n int) bool {
	count := 0
	for _, m := range results {
		if strings.Contains(m.Content, s) {
			count++
		}
	}
	return count >= n
}

// demoModel is the scripted model of demo mode. It thinks for pace before each reply, so a
// person watching the console sees the status card and the checklist move.
type demoModel struct {
	pace time.Duration
}

var _ agent.Model = demoModel{}

func (d demoModel) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	mv := demoNext(req.Messages, len(req.Tools) > 0)
	think := d.pace
	if mv.Call == nil && req.OnText != nil {
		// The answer is written word by word over the second half of the thinking time,
		// as a streaming model would, so the console shows it being written.
		think = d.pace / 2
	}
	if err := pause(ctx, think); err != nil {
		return agent.Reply{}, err
	}
	if think != d.pace {
		if err := streamWords(ctx, mv.Text, d.pace-think, req.OnText); err != nil {
			return agent.Reply{}, err
		}
	}
	msg := agent.Message{Role: agent.RoleAssistant, Content: mv.Text}
	if mv.Call != nil {
		c := *mv.Call
		c.ID = fmt.Sprintf("demo_%d", len(req.Messages))
		msg.ToolCalls = []agent.ToolCall{c}
	}
	prompt := agent.EstimateTokens(req.Messages)
	return agent.Reply{Message: msg, Usage: agent.Usage{PromptTokens: prompt, CompletionTokens: 40, Calls: 1}, FinishReason: "stop"}, nil
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// streamWords passes text to onText a word at a time, spread over d.
func streamWords(ctx context.Context, text string, d time.Duration, onText func(agent.TextDelta)) error {
	words := strings.SplitAfter(text, " ")
	for _, w := range words {
		onText(agent.TextDelta{Text: w})
		if err := pause(ctx, d/time.Duration(len(words))); err != nil {
			return err
		}
	}
	return nil
}
