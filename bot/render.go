package bot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot/text"
)

// maxArgsShown bounds the arguments on an approval card: a code field is not split by the
// adapters, and Slack refuses a block over 3000 characters. The cut is said on the card.
const maxArgsShown = 2800

// render builds the message for an outbox item from the records as they are now, so an item
// that waited shows the latest state. It reads the store only through tx and does no I/O of
// its own, so it can run again inside a transaction to see whether what was sent is current.
func render(tx Tx, it OutboxItem) (Message, error) {
	m, _, err := renderRun(tx, it)
	return m, err
}

// renderRun is render that also returns the run it read, for an item of a run: the record
// carries the card's reference too (postedRef), which then needs no read of its own.
func renderRun(tx Tx, it OutboxItem) (Message, *RunRecord, error) {
	switch it.Kind {
	case OutboxNotice:
		return Message{Kind: KindNotice, Text: it.Text}, nil, nil
	case OutboxAsk:
		m, err := askMessage(tx, it)
		return m, nil, err
	case OutboxGrants:
		gs, err := tx.Grants(it.Text)
		if err != nil {
			return Message{}, nil, fmt.Errorf("load grants of %s: %w", it.Text, err)
		}
		return grantsMessage(gs), nil, nil
	case OutboxMemory:
		m, err := memoryMessage(tx, it)
		return m, nil, err
	}
	// No message shows the conversation with the model, the bulk of a long run.
	rec, err := tx.RunBrief(it.RunID)
	if err != nil {
		return Message{}, nil, fmt.Errorf("load run %s: %w", it.RunID, err)
	}
	m, err := runMessage(tx, it, rec)
	return m, rec, err
}

// runMessage is the message of an item of run rec.
func runMessage(tx Tx, it OutboxItem, rec *RunRecord) (Message, error) {
	st := rec.State
	switch it.Kind {
	case OutboxCard:
		return statusCard(rec), nil
	case OutboxApprovalCard:
		ap, err := tx.Approval(it.ApprovalID)
		if err != nil {
			return Message{}, fmt.Errorf("load approval %s: %w", it.ApprovalID, err)
		}
		return approvalCard(ap, st.Call(ap.CallID)), nil
	case OutboxAnswer:
		m := answerMessage(st)
		m.Buttons = feedbackButtons(rec)
		if rec.SaveAction != "" {
			m.Buttons = append(m.Buttons, Button{ID: rec.SaveAction, Label: "Save as playbook"})
		}
		return m, nil
	case OutboxFailure:
		return failureMessage(st), nil
	case OutboxQuestion:
		m := Message{Kind: KindQuestion, Title: "The run needs you", Text: it.Text}
		switch {
		case rec.Status != agent.StatusAwaitingInput:
		case st.Pause.Kind == agent.PauseAskUser || st.Pause.Kind == agent.PauseQuestion:
			m.Title = "Question"
			m.Footer = "Reply in this thread to answer."
		default:
			m.Footer = "Reply in this thread with instructions, or choose:"
			label := "Continue"
			if st.Pause.Kind == agent.PausePerson {
				label = "Resume"
			}
			m.Buttons = []Button{
				{ID: rec.ContinueAction, Label: label, Style: StylePrimary},
				{ID: rec.StopAction, Label: "Stop", Style: StyleDanger},
			}
		}
		return m, nil
	}
	return Message{}, fmt.Errorf("unknown outbox kind %q", it.Kind)
}

// statusCard is the run's one progress message, edited in place as the run goes.
func statusCard(rec *RunRecord) Message {
	st := rec.State
	p := st.Progress()
	m := Message{Kind: KindStatus, Title: clip(st.Goal, 150), Text: statusLabel(rec.Status)}
	for _, it := range p.Plan {
		m.Plan = append(m.Plan, PlanLine{Text: it.Step, Status: string(it.Status)})
	}
	if p.Current != "" && !rec.Status.Terminal() {
		m.Text += ": " + p.Current
	}
	if f, ok := plannerExchange(st.Planning); ok {
		m.Fields = append(m.Fields, f)
	}
	// A queued run is its thread's active run, about to start (or waiting for a free
	// slot): to the person who asked, it is at work already.
	switch {
	case rec.Status == agent.StatusRunning && rec.Asking != "":
		// A tool of the run waits on a person's answer (ask.go): the run works on, but
		// for the thread it waits.
		m.Text = "Waiting for a reply: a question from " + clip(rec.Asking, 100)
	case rec.Status == agent.StatusRunning || rec.Status == agent.StatusQueued:
		m.Working, m.Activity = true, p.Current
	}
	m.Steps, m.EarlierSteps = runSteps(st)
	m.Footer = fmt.Sprintf("Step %d · %s · %d tokens · $%.4f", p.Step, p.Elapsed.Round(time.Second), p.Usage.Total(), p.Usage.Cost) + autonomyFooter(st)
	if !rec.Status.Terminal() && rec.CancelAction != "" {
		m.Buttons = controlButtons(rec)
	}
	if rec.PauseBy != "" && !rec.Status.Terminal() && !pausedByPerson(rec) {
		m.Text += " (pausing at the next step, asked by " + rec.PauseBy + ")"
	}
	return m
}

// plannerExchange is the latest question an executor asked and the answer it got, collapsed
// to a line each, for the card of a planned run; the whole conversation is in
// `loopbot runs show`.
func plannerExchange(p *agent.Planning) (Field, bool) {
	q, a := p.LastQuestion()
	if q == nil {
		return Field{}, false
	}
	v := clip(strings.Join(strings.Fields(q.Text), " "), 200)
	switch {
	case a != nil:
		who := "Planner"
		if a.From != "planner" {
			who = "Answered by " + strings.TrimPrefix(a.From, "person ")
		}
		v += "\n" + who + ": " + clip(strings.Join(strings.Fields(a.Text), " "), 200)
	default:
		v += "\n(waiting for an answer)"
	}
	return Field{Name: "Question from " + q.From, Value: v}, true
}

// statusLabel says where a run is in words.
func statusLabel(s agent.Status) string {
	switch s {
	case agent.StatusQueued:
		return "Queued"
	case agent.StatusRunning:
		return "Working"
	case agent.StatusAwaitingApproval:
		return "Waiting for approval"
	case agent.StatusAwaitingInput:
		return "Waiting for a reply"
	case agent.StatusCompleted:
		return "Done"
	case agent.StatusFailed:
		return "Failed"
	case agent.StatusCancelled:
		return "Cancelled"
	case agent.StatusBudgetExhausted:
		return "Stopped: budget spent"
	}
	return string(s)
}

// approvalCard asks for a decision on one call, or says how it was decided. c is the call as
// the run state has it; it is nil only if the state lost it, which the card says.
func approvalCard(ap *Approval, c *agent.CallRecord) Message {
	m := Message{Kind: KindApproval, Title: "Approve " + ap.Tool + "?"}
	args, reason := "(the call is no longer in the run)", ""
	if c != nil {
		args, reason = prettyArgs(c.Arguments), c.RiskReason
	}
	m.Fields = []Field{
		{Name: "Arguments", Value: args, Code: true},
		{Name: "Risk", Value: ap.Risk.String()},
	}
	if reason != "" {
		m.Fields = append(m.Fields, Field{Name: "Why", Value: reason})
	}
	// What the call would change (write_file's diff of the file it replaces) comes last,
	// so a platform that must drop fields to fit drops it before the risk.
	if c != nil && c.Preview != "" {
		m.Fields = append(m.Fields, Field{Name: "Changes", Value: c.Preview, Code: true})
	}
	m.Footer = "Run started by " + displayName(ap.Requester)
	when := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }
	switch ap.Status {
	case ApprovalPending:
		m.Text, m.Buttons = approvalChoices(ap)
		if ap.Pattern != "" && ap.AlwaysAction != "" {
			m.Fields = append(m.Fields, Field{Name: "Always allow here covers", Value: ap.Tool + " " + ap.Pattern, Code: true})
		}
	case ApprovalApproved:
		m.Title = ap.Tool + ": approved"
		m.Text = "Approved by " + displayName(ap.DecidedBy) + " at " + when(ap.DecidedAt) + "."
		switch ap.Granted {
		case agent.GrantRun:
			m.Text += " Later " + ap.Tool + " calls at risk " + ap.Risk.String() + " or lower run without asking in this run."
		case agent.GrantChannel:
			m.Text += " " + ap.Tool + " " + ap.Pattern + " is allowed in this channel until revoked (grants)."
		}
	case ApprovalRejected:
		m.Title = ap.Tool + ": rejected"
		m.Text = "Rejected by " + displayName(ap.DecidedBy) + " at " + when(ap.DecidedAt) + "."
		if ap.Reason != "" {
			m.Text += " Reason: " + ap.Reason
		}
	case ApprovalExpired:
		m.Title = ap.Tool + ": expired"
		m.Text = "Expired: not approved within " + shortDuration(ap.ExpiresAt.Sub(ap.CreatedAt)) + "."
	case ApprovalCancelled:
		m.Title = ap.Tool + ": closed"
		m.Text = "Closed: the run was cancelled."
	}
	return m
}

// prettyArgs indents JSON arguments for reading; anything else is shown as the model sent it.
func prettyArgs(raw string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(raw), "", "  ") != nil {
		b.Reset()
		b.WriteString(raw)
	}
	if b.Len() > maxArgsShown {
		return clip(b.String(), maxArgsShown) + "\n(cut: the run's transcript has the full arguments)"
	}
	return b.String()
}

// failureMessage says how a run ended without an answer, and what it did and did not do.
func failureMessage(st *agent.State) Message {
	m := Message{Kind: KindFailure}
	switch st.Status {
	case agent.StatusCancelled:
		m.Title = "Run cancelled"
	case agent.StatusBudgetExhausted:
		m.Title = "Run stopped: budget spent"
	default:
		m.Title = "Run failed"
	}
	parts := []string{st.Error}
	if st.Status == agent.StatusBudgetExhausted && st.Answer != "" {
		// The loop's answer at a spent budget already ends with the summary.
		parts = append(parts, st.Answer)
	} else if !strings.Contains(st.Error, st.Summary()) {
		parts = append(parts, st.Summary())
	}
	m.Text = strings.TrimSpace(strings.Join(parts, "\n\n"))
	return withFiles(m, st)
}

// shortDuration writes d as people do: 30m rather than Go's 30m0s.
func shortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// clip is text.ClipBytes under the name the rest of the package calls it by: bytes are the
// unit whatever platform the text goes to (see package text).
func clip(s string, n int) string { return text.ClipBytes(s, n) }
