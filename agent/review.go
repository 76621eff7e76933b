package agent

import (
	"context"
	"fmt"
	"slices"
)

// Sanity checks on demand and on their own triggers (seed 004). Besides every SanityEvery
// steps and after failures, the check runs when a person asks for it in the run's thread (a
// note with Sanity set, taken at the next step boundary), after a step whose output is large,
// and when the prompt nears the context budget. The verdicts the thread should see are kept
// in State.Reviews, which the bot posts as it saves the state: every verdict of a check
// that was asked for or triggered, and every concern or pause of the periodic ones.

// Review is one sanity verdict shown in the run's thread.
type Review struct {
	Step    int    `json:"step"`
	Verdict string `json:"verdict"`
	Note    string `json:"note,omitempty"`
	// Why is what asked for the check: a person, a large output, the context budget;
	// empty for the periodic check.
	Why string `json:"why,omitempty"`
}

// Review verdicts as the thread reads them.
const (
	ReviewOnTrack     = verdictOnTrack
	ReviewConcerns    = verdictConcerns
	ReviewShouldPause = verdictShouldStop
)

// What triggers a check by itself: an output of at least largeOutput bytes in the step, or
// a prompt of at least nearBudgetShare of the context budget; such a check runs at most
// once in autoSanityGap steps, so a long run near its budget is not reviewed at every step.
const (
	largeOutput     = 32 << 10
	nearBudgetShare = 0.85
	autoSanityGap   = 5
)

// HasSanity reports whether the agent has a sanity model, so a check can be asked for.
func (a *Agent) HasSanity() bool { return a.sanity != nil }

// sanityTrigger says why the step just done calls for a check by itself, or "". The triggers
// work when the periodic or after-failure checks are on: an operator who turned the sanity
// check off has not asked for its cost.
func (r *runner) sanityTrigger() string {
	st, cfg := r.st, r.a.cfg
	if cfg.SanityEvery == 0 && !cfg.SanityAfterFailures {
		return ""
	}
	if st.LastSanityStep > 0 && st.Step-st.LastSanityStep < autoSanityGap {
		return ""
	}
	if slices.ContainsFunc(st.Calls, func(c CallRecord) bool { return c.Step == st.Step && len(c.Output) >= largeOutput }) {
		return "a tool returned a large output"
	}
	if r.promptTokens >= int(nearBudgetShare*float64(cfg.ContextTokens)) {
		return fmt.Sprintf("the context is nearing its budget (%d of %d tokens)", r.promptTokens, cfg.ContextTokens)
	}
	return ""
}

// askedSanity runs the check a person asked for, if one was asked since the last step.
func (r *runner) askedSanity(ctx, wctx context.Context) (paused bool, err error) {
	why := r.sanityAsked
	r.sanityAsked = ""
	if why == "" || r.a.sanity == nil {
		return false, nil
	}
	return r.sanityCheck(ctx, wctx, why)
}

// keepReview records a verdict for the thread when it has something to say there.
func (r *runner) keepReview(v sanityVerdict, why string) {
	if why == "" && v.Verdict == verdictOnTrack {
		return
	}
	r.st.Reviews = append(r.st.Reviews, Review{Step: r.st.Step, Verdict: v.Verdict, Note: v.Note, Why: why})
}
