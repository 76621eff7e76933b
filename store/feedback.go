package store

import (
	"bytes"
	"errors"
	"slices"

	"github.com/loopbot/loopbot/bot"
)

// Ratings of answers are kept under run ID + NUL + user ID, so a person's second rating of
// an answer replaces the first, and one run's ratings are one range of keys.

func feedbackKey(runID, userID string) string { return runID + "\x00" + userID }

func (t *tx) PutFeedback(f *bot.Feedback) error {
	switch {
	case f == nil:
		return errors.New("put feedback: nil")
	case f.RunID == "" || f.User.ID == "":
		return errors.New("put feedback: no run or no user")
	}
	return put(t, bucketFeedback, feedbackKey(f.RunID, f.User.ID), "feedback", f)
}

// Feedback scans the bucket: ratings are a few per answer, and the scan for one run reads
// only that run's range.
func (t *tx) Feedback(runID string) ([]*bot.Feedback, error) {
	b, err := t.bucket(bucketFeedback)
	if err != nil {
		return nil, err
	}
	var out []*bot.Feedback
	c := b.Cursor()
	prefix := []byte(nil)
	if runID != "" {
		prefix = []byte(feedbackKey(runID, ""))
	}
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		f, err := decode[bot.Feedback](v, "feedback "+string(k))
		if err != nil {
			// A rating that does not decode hides nothing else; it is moved aside once
			// this transaction ends.
			t.undecodable(bucketFeedback, k, v, err)
			continue
		}
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b *bot.Feedback) int { return a.At.Compare(b.At) })
	return out, nil
}
