package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/internal/lazyre"
)

// redactor returns the Redactor of what the bot posts: run records hold what the model and
// the tools saw, secrets included, and a terminal is one more place they must not reach.
func (m *Main) redactor() *bot.Redactor {
	return bot.NewRedactor(append(slices.Clone(m.Config.Bot.Redact), secretValues(m.Config)...))
}

// escapeSeq matches terminal escape sequences: CSI (cursor moves, screen clears, colours),
// OSC (window titles, hyperlinks, clipboard writes) and the other string and two-character
// forms, in their 7-bit and 8-bit spellings.
var escapeSeq = lazyre.New(`\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b\x{9c}]*(?:\x07|\x1b\\|\x{9c})?|[PX^_][^\x1b\x{9c}]*(?:\x1b\\|\x{9c})?|[ -/]*[0-~]?)|\x{9b}[0-?]*[ -/]*[@-~]?|[\x{9d}\x{90}\x{98}\x{9e}\x{9f}][^\x07\x1b\x{9c}]*(?:\x07|\x1b\\|\x{9c})?`)

// terminalText makes stored text safe to print: a transcript holds what tools and people
// wrote, and an escape sequence in it would retitle the window, clear the screen or hide
// lines. Escape sequences go whole, then every control character but newline and tab, and
// the bidirectional overrides that reorder what a line shows; bytes that are not UTF-8
// become U+FFFD, since a terminal may read a lone 0x9b as an escape.
func terminalText(s string) string {
	s = escapeSeq.ReplaceAllString(strings.ToValidUTF8(s, "\uFFFD"), "")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case unicode.IsControl(r), r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
			return -1
		}
		return r
	}, s)
}

// writeRuns prints one line per run, newest last, secrets redacted.
func writeRuns(w io.Writer, runs []*bot.RunRecord, red *bot.Redactor) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSTEPS\tTOKENS\tCOST\tCREATED\tTHREAD\tGOAL")
	for _, r := range runs {
		steps, tokens, cost := 0, 0, 0.0
		if r.State != nil {
			steps, tokens, cost = r.State.Step, r.State.Usage.Total(), r.State.Usage.Cost
		}
		goal := ""
		if r.State != nil {
			goal = oneLine(terminalText(red.Redact(r.State.Goal)), 60)
		}
		// Fields are made safe before the columns are measured, or a stripped escape
		// sequence would leave a column short.
		thread := terminalText(r.Thread.Platform + ":" + r.Thread.Channel + "/" + r.Thread.Thread)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t$%.4f\t%s\t%s\t%s\n", terminalText(r.ID), r.Status, steps, tokens, cost,
			r.CreatedAt.UTC().Format(time.DateTime), thread, goal)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, terminalText(red.Redact(b.String())))
	return err
}

// writeTranscript prints what happened in a run: the goal, each step's tool calls with their
// risk, approvals and outcomes, the decisions of the audit log, usage and the ending. Secrets
// are redacted as in a post, and control characters removed.
func writeTranscript(w io.Writer, r *bot.RunRecord, audit []bot.AuditEntry, red *bot.Redactor) error {
	st := r.State
	if st == nil {
		return fmt.Errorf("run %s has no state", r.ID)
	}
	// Fields cut short are redacted before the cut, which could leave a secret's head
	// that no longer looks like one; the whole is redacted again at the end.
	clip := func(s string, n int) string { return oneLine(red.Redact(s), n) }
	b := &strings.Builder{}
	fmt.Fprintf(b, "Run %s  (%s)\n", r.ID, st.Status)
	fmt.Fprintf(b, "Thread:    %s %s/%s\n", r.Thread.Platform, r.Thread.Channel, r.Thread.Thread)
	fmt.Fprintf(b, "Requester: %s\n", userName(r.Requester))
	fmt.Fprintf(b, "Created:   %s\n", r.CreatedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(b, "Goal:      %s\n", st.Goal)
	fmt.Fprintf(b, "Usage:     %d steps, %d prompt + %d completion tokens (%d cached), $%.4f, %s active\n",
		st.Step, st.Usage.PromptTokens, st.Usage.CompletionTokens, st.Usage.CachedTokens, st.Usage.Cost, st.Active.Round(time.Millisecond))
	if lv := st.EffectiveLevel(); lv != "" {
		fmt.Fprintf(b, "Autonomy:  %s, momentum %.2f\n", lv, st.Momentum.Score())
	}
	if len(st.Plan) > 0 {
		b.WriteString("\nPlan:\n")
		for _, it := range st.Plan {
			fmt.Fprintf(b, "  [%s] %s\n", planMark(it.Status), it.Step)
		}
	}
	writeCalls(b, st.Calls, "", clip)
	for _, g := range st.Grants {
		fmt.Fprintf(b, "\nGranted for this run by %s: %s\n", g.By, clip(g.Describe(), 200))
	}
	writeConversation(b, st.Planning, clip)
	if len(audit) > 0 {
		b.WriteString("\nDecisions:\n")
		for _, e := range audit {
			fmt.Fprintf(b, "  %s  %s by %s", e.At.UTC().Format(time.RFC3339), e.Action, userName(e.Actor))
			if e.Tool != "" {
				fmt.Fprintf(b, "  %s args sha256:%s", e.Tool, shortHash(e.ArgsHash))
			}
			if e.Detail != "" {
				fmt.Fprintf(b, "  (%s)", e.Detail)
			}
			b.WriteString("\n")
		}
	}
	if st.Pause != nil {
		fmt.Fprintf(b, "\nWaiting: %s\n", st.Pause.Reason)
		if st.Pause.Question != "" {
			fmt.Fprintf(b, "Question: %s\n", st.Pause.Question)
		}
	}
	if st.Error != "" {
		fmt.Fprintf(b, "\nEnded: %s\n", st.Error)
	}
	if st.Answer != "" {
		fmt.Fprintf(b, "\nAnswer:\n%s\n", st.Answer)
	}
	b.WriteString(feedbackLine(audit))
	_, err := io.WriteString(w, terminalText(red.Redact(b.String())))
	return err
}

// writeCalls prints the tool calls of a run (or, indented, of a plan step's executor) step by
// step.
func writeCalls(b *strings.Builder, calls []agent.CallRecord, indent string, clip func(string, int) string) {
	step := -1
	for _, c := range calls {
		if c.Step != step {
			step = c.Step
			fmt.Fprintf(b, "\n%sStep %d\n", indent, step)
		}
		fmt.Fprintf(b, "%s  %s(%s)\n", indent, c.Name, clip(c.Arguments, 200))
		risk := ""
		if c.Risk != 0 {
			risk = c.Risk.String()
			if c.RiskReason != "" {
				risk += ": " + c.RiskReason
			}
		}
		fmt.Fprintf(b, "%s    status: %s", indent, c.Status)
		if risk != "" {
			fmt.Fprintf(b, "   risk: %s", risk)
		}
		b.WriteString("\n")
		if d := c.Decision; d != nil {
			verdict := "rejected"
			if d.Approved {
				verdict = "approved"
			}
			fmt.Fprintf(b, "%s    %s by %s at %s", indent, verdict, d.By, d.At.UTC().Format(time.RFC3339))
			if d.Reason != "" {
				fmt.Fprintf(b, " (%s)", d.Reason)
			}
			b.WriteString("\n")
		}
		if g := c.GrantedBy; g != nil {
			fmt.Fprintf(b, "%s    ran without asking under grant %s (%s, by %s): %s\n", indent, g.ID, g.Scope, g.By, clip(g.Describe, 200))
		}
		if c.Error != "" {
			fmt.Fprintf(b, "%s    error: %s\n", indent, clip(c.Error, 300))
		}
		if c.Output != "" {
			fmt.Fprintf(b, "%s    output: %s\n", indent, clip(c.Output, 300))
		}
	}
}

// writeConversation prints a planned run's steps with their executors' calls, and the whole
// conversation between the planner, the executors and the person, with each message's type.
func writeConversation(b *strings.Builder, p *agent.Planning, clip func(string, int) string) {
	if p == nil || len(p.Conversation) == 0 {
		return
	}
	for _, s := range p.Steps {
		fmt.Fprintf(b, "\nPlan step %s [%s] %s", s.ID, s.Status, clip(s.Description, 200))
		if len(s.DependsOn) > 0 {
			fmt.Fprintf(b, " (after %s)", strings.Join(s.DependsOn, ", "))
		}
		fmt.Fprintf(b, "  scope: %s", s.Scope)
		if s.Attempts > 1 {
			fmt.Fprintf(b, "  attempts: %d", s.Attempts)
		}
		b.WriteString("\n")
		if s.Sub != nil {
			fmt.Fprintf(b, "  executor: %s, %d steps, %d tokens\n", s.Sub.Status, s.Sub.Step, s.Sub.Usage.Total())
			writeCalls(b, s.Sub.Calls, "  ", clip)
		}
	}
	b.WriteString("\nPlanner-executor conversation:\n")
	for _, m := range p.Conversation {
		fmt.Fprintf(b, "  %d [%s] %s -> %s: %s\n", m.Seq, m.Type, m.From, m.To, clip(m.Text, 300))
		if m.Verdict != "" {
			fmt.Fprintf(b, "      verdict: %s (%s)\n", m.Verdict, clip(m.Reason, 200))
		}
	}
}

func planMark(s agent.PlanStatus) string {
	switch s {
	case agent.PlanDone:
		return "x"
	case agent.PlanInProgress:
		return ">"
	case agent.PlanFailed:
		return "!"
	}
	return " "
}

func userName(u bot.User) string {
	if u.Name != "" && u.Name != u.ID {
		return u.Name + " (" + u.ID + ")"
	}
	return u.ID
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// oneLine flattens s to one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
