package postgres

import (
	"errors"
	"fmt"
	"slices"

	"github.com/loopbot/loopbot/bot"
)

// Ratings of answers (bot/feedback.go) are the feedback bucket of the records table, keyed by
// run ID + "/" + user ID, so a person's second rating of an answer replaces the first and
// one run's ratings are the keys with its prefix. Run IDs hold no "/" (bot.NewID is base32),
// and PostgreSQL's text cannot hold the NUL byte bbolt's keys separate them with.
const bucketFeedback = "feedback"

func feedbackKey(runID, userID string) string { return runID + "/" + userID }

func (t *tx) PutFeedback(f *bot.Feedback) error {
	switch {
	case f == nil:
		return errors.New("put feedback: nil")
	case f.RunID == "" || f.User.ID == "":
		return errors.New("put feedback: no run or no user")
	}
	return putRecord(t, bucketFeedback, feedbackKey(f.RunID, f.User.ID), "feedback", f)
}

// Feedback lists the ratings of one run's answer, or of every run when runID is empty,
// oldest first.
func (t *tx) Feedback(runID string) ([]*bot.Feedback, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("list feedback: %w", err)
	}
	sql, args := "SELECT key, data FROM records WHERE bucket = $1", []any{bucketFeedback}
	if runID != "" {
		sql += " AND left(key, char_length($2)) = $2"
		args = append(args, feedbackKey(runID, ""))
	}
	out, err := scan[bot.Feedback](t, bucketFeedback, "feedback", sql+" ORDER BY key"+t.forUpdate(), args...)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b *bot.Feedback) int { return a.At.Compare(b.At) })
	return out, nil
}
