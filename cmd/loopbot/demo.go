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
// model, so the whole flow (a planner's plan of three steps, executors with a safe tool, a
// question the planner answers, a call that needs approval, the answer) can be seen with no
// credentials at all. The script reads the conversation it is sent and answers
// the next move, so any number of demo runs, in any thread, work.

// demoAgentConfig makes write_file need an approval in the demo, so the demo shows the
// Approve and Reject buttons, and plans every goal, so it shows the planner and its executors.
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
	c.Planning = agent.PlanningAlways
	return c
}

// demoMove is the scripted model's next reply: text, or one tool call.
type demoMove struct {
	Text string
	Call *agent.ToolCall
}

// The demo's plan: three steps, the second asking the planner where the report goes.
const demoPlanJSON = `{"needs_plan": true, "reason": "the goal has three parts", "steps": [` +
	`{"id": "s1", "description": "Look at the workspace", "acceptance": "the files are listed", "scope": "read_only"},` +
	`{"id": "s2", "description": "Write a short report", "depends_on": ["s1"], "acceptance": "the report is written", "scope": "full"},` +
	`{"id": "s3", "description": "Tell you what I did", "depends_on": ["s2"], "acceptance": "a short summary", "scope": "read_only"}]}`

// demoNext decides the scripted model's reply from the request: the planner's (a JSON reply)
// or an executor's, whose step it reads from the assignment.
func demoNext(req agent.Request) demoMove {
	var task, goal, step string
	var results []agent.Message
	for _, m := range req.Messages {
		switch m.Role {
		case agent.RoleUser:
			if task == "" {
				task = m.Content
			}
		case agent.RoleTool:
			results = append(results, m)
		}
	}
	if _, rest, ok := strings.Cut(task, "Your step ("); ok {
		step, _, _ = strings.Cut(rest, ")")
	}
	if g, ok := strings.CutPrefix(task, "The person's goal: "); ok {
		goal, _, _ = strings.Cut(g, "\n\nYour step")
	}
	switch {
	case req.JSON && strings.Contains(task, " asks: "):
		return demoMove{Text: `{"answer": "Write it to report.md in the workspace, as the goal asks for a report.", "escalate": false}`}
	case req.JSON && strings.Contains(task, " reports: "):
		return demoMove{Text: `{"verdict": "accept", "reason": "it does what the step asks"}`}
	case req.JSON:
		return demoMove{Text: demoPlanJSON}
	case len(req.Tools) == 0:
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
	switch step {
	case "s1":
		if _, ok := last("list_files"); ok {
			return demoMove{Text: "I listed the workspace: there is no report yet."}
		}
		return demoMove{Call: &agent.ToolCall{Name: "list_files", Arguments: `{"path":"."}`}}
	case "s2":
		if _, asked := last("ask_planner"); !asked {
			return demoMove{Call: &agent.ToolCall{Name: "ask_planner", Arguments: `{"question":"Which file should the report go to?"}`}}
		}
		written, ok := last("write_file")
		switch {
		case !ok:
			report := "# Demo report\n\nGoal: " + oneLine(goal, 200) + "\n\nThis file was written by loopbot's demo mode after you approved it.\n"
			b, _ := json.Marshal(map[string]string{"path": "report.md", "content": report})
			return demoMove{Call: &agent.ToolCall{Name: "write_file", Arguments: string(b)}}
		case strings.Contains(written.Content, "rejected"):
			return demoMove{Text: "You rejected writing report.md, so it was left unchanged."}
		case strings.HasPrefix(written.Content, "Error"):
			return demoMove{Text: "Writing report.md failed: " + oneLine(written.Content, 200)}
		}
		return demoMove{Text: "Wrote report.md."}
	}
	switch {
	case strings.Contains(task, "You rejected writing"):
		return demoMove{Text: "I looked at the workspace, but you rejected writing `report.md`, so I left it unchanged. " +
			"Nothing else was done. (This is loopbot's demo mode: a scripted model played this run.)"}
	case strings.Contains(task, "Writing report.md failed"):
		return demoMove{Text: "I looked at the workspace, but writing `report.md` failed."}
	}
	return demoMove{Text: "Done. A planner split your goal into three steps; an executor looked at the workspace, another asked the planner " +
		"where the report goes and wrote **report.md** with a short report on your goal:\n\n> " + oneLine(goal, 200) +
		"\n\n(This is loopbot's demo mode: a scripted model played this run. Configure `[llm]` or OPENAI_API_KEY for a real one.)"}
}

// demoModel is the scripted model of demo mode. It thinks for pace before each reply, so a
// person watching the console sees the status card and the checklist move.
type demoModel struct {
	pace time.Duration
}

var _ agent.Model = demoModel{}

func (d demoModel) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	mv := demoNext(req)
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
