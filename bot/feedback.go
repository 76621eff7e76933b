package bot

import (
	"context"
	"errors"
	"time"
)

// FeedbackValue is how a person rated an answer.
type FeedbackValue string

// Ratings of an answer.
const (
	FeedbackUp   FeedbackValue = "up"
	FeedbackDown FeedbackValue = "down"
)

// Feedback is one person's rating of one run's answer. A person has one rating per answer:
// rating it again replaces it.
type Feedback struct {
	RunID  string        `json:"run_id"`
	Thread ThreadRef     `json:"thread"`
	User   User          `json:"user"`
	Value  FeedbackValue `json:"value"`
	At     time.Time     `json:"at"`
}

// What a person who rated an answer is told.
const (
	noticeRated        = "Thanks: you rated this answer "
	noticeRatedAgain   = "You changed your rating of this answer to "
	noticeRatedAlready = "You already rated this answer "
	noticeNoRating     = "Only people allowed to use loopbot here can rate its answers."
)

// words says a rating in the words of the notices.
func (v FeedbackValue) words() string {
	if v == FeedbackUp {
		return "helpful."
	}
	return "not helpful."
}

// offerFeedback makes the opaque IDs of the rating buttons of rec's answer, once, as the run
// completes. The caller stores rec.
func (r *records) offerFeedback(tx Tx, rec *RunRecord) error {
	if rec.FeedbackUpAction != "" {
		return nil
	}
	rec.FeedbackUpAction, rec.FeedbackDownAction = r.newID(), r.newID()
	for id, v := range map[string]FeedbackValue{rec.FeedbackUpAction: FeedbackUp, rec.FeedbackDownAction: FeedbackDown} {
		if err := tx.PutAction(&Action{ID: id, Kind: ActionFeedback, RunID: rec.ID, Feedback: v}); err != nil {
			return err
		}
	}
	return nil
}

// feedbackButtons are the rating buttons of rec's answer; none for a run that completed
// before answers had them.
func feedbackButtons(rec *RunRecord) []Button {
	if rec.FeedbackUpAction == "" || rec.FeedbackDownAction == "" {
		return nil
	}
	return []Button{
		{ID: rec.FeedbackUpAction, Label: "👍 Helpful", Feedback: FeedbackUp},
		{ID: rec.FeedbackDownAction, Label: "👎 Not helpful", Feedback: FeedbackDown},
	}
}

// rate stores who's rating of a run's answer from a click in thread from. The click must
// come from the answer's own thread, by someone allowed to use the bot; a rating equal to
// the one stored changes nothing.
func (b *Bot) rate(ctx context.Context, who User, from ThreadRef, act *Action) (Result, error) {
	res := Result{RunID: act.RunID}
	if act.Feedback != FeedbackUp && act.Feedback != FeedbackDown {
		b.log.Error("stored feedback action without a rating", "action", act.ID, "feedback", act.Feedback)
		return Result{Notice: noticeInvalid}, nil
	}
	err := b.store.Update(ctx, func(tx Tx) error {
		res.Notice = ""
		rec, err := tx.RunHeader(act.RunID)
		if err != nil {
			return err
		}
		switch {
		case !fromThread(from, rec.Thread):
			b.log.Warn("rating from another thread refused", "run", rec.ID, "user", who.ID, "from", from.Key(), "thread", rec.Thread.Key())
			res.Notice = noticeOtherThread
			return nil
		case !b.cfg.Policy.userAllowed(who):
			res.Notice = noticeNoRating
			return nil
		}
		had, err := tx.Feedback(rec.ID)
		if err != nil {
			return err
		}
		res.Notice = noticeRated + act.Feedback.words()
		for _, f := range had {
			if f.User.ID != who.ID {
				continue
			}
			if f.Value == act.Feedback {
				res.Notice = noticeRatedAlready + act.Feedback.words()
				return nil
			}
			res.Notice = noticeRatedAgain + act.Feedback.words()
		}
		now := b.clock.stamp()
		if err := tx.PutFeedback(&Feedback{RunID: rec.ID, Thread: rec.Thread, User: who, Value: act.Feedback, At: now}); err != nil {
			return err
		}
		return tx.AppendAudit(AuditEntry{At: now, Actor: who, Action: "feedback", RunID: rec.ID, Detail: string(act.Feedback)})
	})
	if errors.Is(err, ErrNotFound) {
		return Result{Notice: noticeInvalid}, nil
	}
	return res, err
}
