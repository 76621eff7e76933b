package bot

import (
	"bytes"
	"encoding/json"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot/text"
)

// Step is one tool call of a run as a person reads it: what was called, with what, what
// came back and how long it took. The status card carries the run's steps; an adapter that
// can fold them (the console) shows each as a collapsible step, others may leave them out.
type Step struct {
	// ID is the call's ID, stable across edits of the card, so a step a reader opened can
	// stay open when the card changes.
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Args are the arguments written for reading (one "name: value" a line, texts as
	// blocks), clipped to maxStepArgs.
	Args string `json:"args,omitempty"`
	// Result is the output, or the error of a call that failed, clipped to maxStepResult.
	Result   string        `json:"result,omitempty"`
	Status   StepStatus    `json:"status"`
	Duration time.Duration `json:"duration,omitempty"`
}

// StepStatus is where a step is, in the few words a reader needs.
type StepStatus string

// Step statuses.
const (
	StepWaiting  StepStatus = "waiting"  // for an approval or an answer
	StepRunning  StepStatus = "running"  // started, not finished
	StepDone     StepStatus = "done"     // succeeded
	StepFailed   StepStatus = "failed"   // failed, invalid or of unknown outcome
	StepRejected StepStatus = "rejected" // a person said no
)

// Bounds of the steps a card carries: the newest maxSteps, each clipped, so a long run's
// card stays within what a platform takes in one message and what the console's history
// keeps of it.
const (
	maxSteps      = 20
	maxStepArgs   = 1200
	maxStepResult = 1200
)

// loopTools are the loop's own tools: their effect is already on the card (the plan) or in
// the thread (the question), so they are not steps.
var loopTools = map[string]bool{"update_plan": true, "ask_user": true, "ask_planner": true}

// runSteps returns the run's newest steps, oldest first, and how many older ones were left
// out.
func runSteps(st *agent.State) (steps []Step, earlier int) {
	// A planned run's calls are its executors' (State.AllCalls), step by step. AnyCall
	// visits the same calls without copying them all for every card.
	st.AnyCall(func(c *agent.CallRecord) bool {
		if !loopTools[c.Name] {
			steps = append(steps, step(*c))
		}
		return false
	})
	if len(steps) > maxSteps {
		earlier = len(steps) - maxSteps
		steps = steps[earlier:]
	}
	return steps, earlier
}

// step writes one call as a step.
func step(c agent.CallRecord) Step {
	s := Step{ID: c.ID, Tool: c.Name, Args: readableArgs(c.Arguments, maxStepArgs)}
	switch c.Status {
	case agent.CallAwaitingApproval, agent.CallAwaitingInput, agent.CallReady, agent.CallApproved:
		s.Status = StepWaiting
	case agent.CallStarted:
		s.Status = StepRunning
	case agent.CallSucceeded:
		s.Status, s.Result = StepDone, c.Output
	case agent.CallRejected:
		s.Status, s.Result = StepRejected, c.Error
	default:
		s.Status, s.Result = StepFailed, c.Error
	}
	if len(s.Result) > maxStepResult {
		s.Result = clip(s.Result, maxStepResult) + "\n(cut)"
	}
	if !c.StartedAt.IsZero() && c.FinishedAt.After(c.StartedAt) {
		s.Duration = c.FinishedAt.Sub(c.StartedAt)
	}
	return s
}

// readableArgs writes a call's JSON arguments as a person reads them: one "name: value" a
// line, in the order the model sent them, and a text of several lines as an indented block
// under its name, rather than one JSON string full of \n. Arguments that are not one JSON
// object are shown as sent. The result is clipped to n bytes, the cut said.
func readableArgs(raw string, n int) string {
	out, ok := argLines(raw)
	if !ok {
		out = raw
	}
	if len(out) > n {
		return clip(out, n) + "\n(cut)"
	}
	return out
}

// argLines is readableArgs for a JSON object; ok is false for anything else.
func argLines(raw string) (string, bool) {
	members, ok := text.Members(raw)
	if !ok {
		return "", false
	}
	var b strings.Builder
	for _, m := range members {
		// A string is decoded once; any other value is shown compact, as it already is
		// when it has no whitespace at all (whitespace inside its strings stays anyway).
		var s string
		isString := len(m.Value) > 0 && m.Value[0] == '"' && json.Unmarshal(m.Value, &s) == nil
		switch {
		case isString && strings.Contains(s, "\n"):
			b.WriteString(m.Name + ":\n")
			for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
				b.WriteString("  " + line + "\n")
			}
		case isString:
			b.WriteString(m.Name + ": " + s + "\n")
		case !bytes.ContainsAny(m.Value, " \t\r\n"):
			b.WriteString(m.Name + ": ")
			b.Write(m.Value)
			b.WriteString("\n")
		default:
			var c bytes.Buffer
			if json.Compact(&c, m.Value) != nil {
				return "", false
			}
			b.WriteString(m.Name + ": " + c.String() + "\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}

// maxFilesListed bounds the files an answer names.
const maxFilesListed = 20

// writtenFiles returns the workspace paths the run's write_file calls wrote, each once, in
// the order first written.
func writtenFiles(st *agent.State) []string {
	var files []string
	seen := map[string]bool{}
	for _, c := range st.Calls {
		if c.Name != "write_file" || c.Status != agent.CallSucceeded {
			continue
		}
		var args struct {
			Path string `json:"path"`
		}
		if json.Unmarshal([]byte(c.Arguments), &args) != nil || args.Path == "" {
			continue
		}
		p := path.Clean(strings.TrimPrefix(args.Path, "./"))
		if seen[p] || p == "." || strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") {
			continue
		}
		seen[p] = true
		files = append(files, p)
	}
	if len(files) > maxFilesListed {
		files = files[:maxFilesListed]
	}
	return files
}

// answerMessage is the run's answer, with the files it wrote.
func answerMessage(st *agent.State) Message {
	return withFiles(Message{Kind: KindAnswer, Text: st.Answer}, st)
}

// withFiles names under m the files the run wrote: in words in the footer, for every
// platform, and as Files, which an adapter that can show the workspace links. A run that
// failed may have written some, and its summary says which as an answer does.
func withFiles(m Message, st *agent.State) Message {
	if files := writtenFiles(st); len(files) > 0 {
		m.Files, m.Workspace = files, st.RunID
		m.Footer = "Files written: " + strings.Join(files, ", ")
	}
	return m
}

// Took says how long the step took as people read it (340 ms, 2.1 s, 3m5s); "" when it is
// not known or not over.
func (s Step) Took() string {
	d := s.Duration
	switch {
	case d <= 0:
		return ""
	case d < time.Millisecond:
		return "<1 ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return d.Round(time.Second).String()
}

// stepMarks mark a step's status in plain text.
var stepMarks = map[StepStatus]string{
	StepWaiting:  "…",
	StepRunning:  "▸",
	StepDone:     "✓",
	StepFailed:   "✗",
	StepRejected: "⊘",
}

// StepsLine is a card's steps as one line of plain text, for a platform that shows no
// more than that (Slack, Discord): each call's mark, tool and time, the newest last. It is
// "" for a card without steps.
func (m Message) StepsLine() string {
	if len(m.Steps) == 0 {
		return ""
	}
	var parts []string
	if m.EarlierSteps > 0 {
		parts = append(parts, strconv.Itoa(m.EarlierSteps)+" earlier")
	}
	for _, s := range m.Steps {
		p := stepMarks[s.Status] + " " + s.Tool
		if t := s.Took(); t != "" {
			p += " " + t
		}
		parts = append(parts, strings.TrimSpace(p))
	}
	return "Tool calls: " + strings.Join(parts, " · ")
}
