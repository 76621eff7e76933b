package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/loopbot/loopbot/agent"
)

// Sanity on demand: "/loopbot sanity" in a run's thread asks the working run for a sanity
// check at its next step boundary. It travels as a steering note marked Sanity, so it is
// durable and taken once like any note; the verdicts reach the thread from the run's state
// (agent.State.Reviews), posted by the checkpoint that saves them.

const (
	noticeNoSanity     = "No model is configured to review the run (loopbot runs in demo mode)."
	noticeSanityQueued = "The sanity check runs at the run's next step; its verdict is posted here."
)

// sanityCommand asks the thread's working run for a sanity check.
func (b *Bot) sanityCommand(ctx context.Context, ev Event) (Result, error) {
	if !b.cfg.Policy.mayStart(ev) {
		return Result{Notice: noticeNotAllowed}, nil
	}
	if !b.hasSanity {
		return Result{Notice: noticeNoSanity}, nil
	}
	var res Result
	err := b.store.Update(ctx, func(tx Tx) error {
		res = Result{Notice: noticeNothingToRun}
		conv, err := tx.Conversation(ev.Thread)
		if err != nil || conv.Active == "" {
			return ignoreNotFound(err)
		}
		rec, err := tx.RunHeader(conv.Active)
		if err != nil {
			return err
		}
		if !steerable(rec.Status) {
			return nil
		}
		res = Result{RunID: rec.ID, Notice: noticeSanityQueued}
		conv.NoteSeq++
		conv.Notes = append(conv.Notes, RunNote{Seq: conv.NoteSeq, RunID: rec.ID, From: displayName(ev.User), Text: "(sanity check)", At: b.clock.stamp(), Sanity: true})
		return tx.PutConversation(conv)
	})
	return res, err
}

// postReviews posts the sanity verdicts of rec's state that the thread has not seen.
func (r *records) postReviews(tx Tx, rec *RunRecord) error {
	reviews := rec.State.Reviews
	if rec.ReviewsPosted >= len(reviews) {
		return nil
	}
	now := r.clock.stamp()
	for _, rv := range reviews[rec.ReviewsPosted:] {
		if err := r.put(tx, rec.Thread, now, noticeItem(rec.ID, r.newID(), reviewText(rv))); err != nil {
			return err
		}
	}
	rec.ReviewsPosted = len(reviews)
	return nil
}

// reviewText is a verdict as the thread reads it.
func reviewText(rv agent.Review) string {
	var verdict string
	switch rv.Verdict {
	case agent.ReviewOnTrack:
		verdict = "on track"
	case agent.ReviewConcerns:
		verdict = "concerns"
	case agent.ReviewShouldPause:
		verdict = "the run should pause"
	default:
		verdict = rv.Verdict
	}
	why := ""
	if rv.Why != "" {
		why = " (" + rv.Why + ")"
	}
	text := fmt.Sprintf("Sanity check at step %d%s: %s.", rv.Step, why, verdict)
	if note := strings.TrimSpace(rv.Note); note != "" {
		text += " " + note
	}
	return text
}

// ignoreNotFound is err, or nil when err says the record is not stored.
func ignoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
