package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Sanity verdicts a reviewing model may return.
const (
	verdictOnTrack    = "on_track"
	verdictConcerns   = "concerns"
	verdictShouldStop = "should_pause"
)

type sanityVerdict struct {
	Verdict string `json:"verdict"`
	Note    string `json:"note"`
}

// sanityCheck asks the cheap sanity model whether the run is on track (seed 004). Concerns
// are injected into the conversation as a note; should_pause pauses the run. A sanity model
// that fails or answers garbage is logged and ignored: it is a safety net, not a gate.
//
// why is what asked for this check ("" for the periodic one); the reviewer is told it.
func (r *runner) sanityCheck(ctx, wctx context.Context, why string) (paused bool, err error) {
	st := r.st
	st.LastSanityStep = st.Step
	reply, err := r.a.sanity.Complete(wctx, Request{JSON: true, Messages: []Message{
		{Role: RoleSystem, Content: `You review the progress of an AI agent working on a goal. Judge whether its recent actions move it towards the goal, ` +
			`whether it repeats itself, and whether it is about to do something the user would not want. Reply with one JSON object: ` +
			`{"verdict": "on_track" | "concerns" | "should_pause", "note": "one or two sentences for the agent"}.`},
		{Role: RoleUser, Content: r.sanityBrief(why)},
	}})
	if err != nil {
		r.a.log.Warn("sanity check failed", "run", st.RunID, "err", err)
		return false, nil
	}
	st.Usage = st.Usage.Add(reply.Usage)
	v, ok := parseVerdict(reply.Message.Content)
	if !ok {
		r.a.log.Warn("sanity check answered garbage", "run", st.RunID, "reply", truncate(reply.Message.Content, 200))
		return false, nil
	}
	r.keepReview(v, why)
	switch v.Verdict {
	case verdictConcerns:
		note := "Note from the reviewer: " + v.Note
		st.Messages = append(st.Messages, Message{Role: RoleUser, Content: note})
		r.emit(Event{Kind: EventNote, Text: note})
	case verdictShouldStop:
		return true, r.pause(ctx, Pause{Kind: PauseSanity, Reason: "A review of the run suggests pausing: " + v.Note})
	}
	return false, nil
}

// parseVerdict finds the verdict object in a reply, tolerating prose or code fences around it.
func parseVerdict(s string) (sanityVerdict, bool) {
	start, end := strings.Index(s, "{"), strings.LastIndex(s, "}")
	if start < 0 || end <= start {
		return sanityVerdict{}, false
	}
	var v sanityVerdict
	if json.Unmarshal([]byte(s[start:end+1]), &v) != nil {
		return sanityVerdict{}, false
	}
	switch v.Verdict {
	case verdictOnTrack, verdictConcerns, verdictShouldStop:
		v.Note = truncate(strings.TrimSpace(v.Note), 500)
		return v, true
	}
	return sanityVerdict{}, false
}

// sanityBrief is the goal, the plan and the latest calls, short enough for a cheap model.
func (r *runner) sanityBrief(why string) string {
	st := r.st
	var b strings.Builder
	if why != "" {
		fmt.Fprintf(&b, "This review was asked for because %s.\n", why)
	}
	fmt.Fprintf(&b, "Goal: %s\n", st.Goal)
	if len(st.Plan) > 0 {
		b.WriteString("Plan:\n")
		for _, it := range st.Plan {
			fmt.Fprintf(&b, "- [%s] %s\n", it.Status, it.Step)
		}
	}
	b.WriteString("Recent actions:\n")
	from := max(0, len(st.Calls)-8)
	for _, c := range st.Calls[from:] {
		outcome := c.Output
		if c.Error != "" {
			outcome = "error: " + c.Error
		}
		fmt.Fprintf(&b, "- step %d: %s(%s) -> %s: %s\n", c.Step, c.Name, truncate(c.Arguments, 200), c.Status, truncate(outcome, 200))
	}
	return b.String()
}
