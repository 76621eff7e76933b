package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// writeRuns prints one line per run, newest last.
func writeRuns(w io.Writer, runs []*bot.RunRecord) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSTEPS\tTOKENS\tCOST\tCREATED\tTHREAD\tGOAL")
	for _, r := range runs {
		steps, tokens, cost := 0, 0, 0.0
		if r.State != nil {
			steps, tokens, cost = r.State.Step, r.State.Usage.Total(), r.State.Usage.Cost
		}
		goal := ""
		if r.State != nil {
			goal = oneLine(r.State.Goal, 60)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t$%.4f\t%s\t%s\t%s\n", r.ID, r.Status, steps, tokens, cost,
			r.CreatedAt.UTC().Format(time.DateTime), r.Thread.Platform+":"+r.Thread.Channel+"/"+r.Thread.Thread, goal)
	}
	return tw.Flush()
}

// writeTranscript prints what happened in a run: the goal, each step's tool calls with their
// risk, approvals and outcomes, the decisions of the audit log, usage and the ending.
func writeTranscript(w io.Writer, r *bot.RunRecord, audit []bot.AuditEntry) error {
	st := r.State
	if st == nil {
		return fmt.Errorf("run %s has no state", r.ID)
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, "Run %s  (%s)\n", r.ID, st.Status)
	fmt.Fprintf(b, "Thread:    %s %s/%s\n", r.Thread.Platform, r.Thread.Channel, r.Thread.Thread)
	fmt.Fprintf(b, "Requester: %s\n", userName(r.Requester))
	fmt.Fprintf(b, "Created:   %s\n", r.CreatedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(b, "Goal:      %s\n", st.Goal)
	fmt.Fprintf(b, "Usage:     %d steps, %d prompt + %d completion tokens (%d cached), $%.4f, %s active\n",
		st.Step, st.Usage.PromptTokens, st.Usage.CompletionTokens, st.Usage.CachedTokens, st.Usage.Cost, st.Active.Round(time.Millisecond))
	if len(st.Plan) > 0 {
		b.WriteString("\nPlan:\n")
		for _, it := range st.Plan {
			fmt.Fprintf(b, "  [%s] %s\n", planMark(it.Status), it.Step)
		}
	}
	step := -1
	for _, c := range st.Calls {
		if c.Step != step {
			step = c.Step
			fmt.Fprintf(b, "\nStep %d\n", step)
		}
		fmt.Fprintf(b, "  %s(%s)\n", c.Name, oneLine(c.Arguments, 200))
		risk := ""
		if c.Risk != 0 {
			risk = c.Risk.String()
			if c.RiskReason != "" {
				risk += ": " + c.RiskReason
			}
		}
		fmt.Fprintf(b, "    status: %s", c.Status)
		if risk != "" {
			fmt.Fprintf(b, "   risk: %s", risk)
		}
		b.WriteString("\n")
		if d := c.Decision; d != nil {
			verdict := "rejected"
			if d.Approved {
				verdict = "approved"
			}
			fmt.Fprintf(b, "    %s by %s at %s", verdict, d.By, d.At.UTC().Format(time.RFC3339))
			if d.Reason != "" {
				fmt.Fprintf(b, " (%s)", d.Reason)
			}
			b.WriteString("\n")
		}
		if c.Error != "" {
			fmt.Fprintf(b, "    error: %s\n", oneLine(c.Error, 300))
		}
		if c.Output != "" {
			fmt.Fprintf(b, "    output: %s\n", oneLine(c.Output, 300))
		}
	}
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
	_, err := io.WriteString(w, b.String())
	return err
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
