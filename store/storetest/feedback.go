package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// testFeedback checks that a person has one rating per answer (rating again replaces it),
// that one run's ratings list without another's, even a run whose ID starts with the
// first's, and that an empty run ID lists all of them, each list oldest first.
func testFeedback(t *testing.T, su *suite) {
	s := su.open(t)
	rate := func(run, user string, v bot.FeedbackValue, d time.Duration) *bot.Feedback {
		return &bot.Feedback{RunID: run, Thread: threadA, User: bot.User{ID: user, Name: "name of " + user}, Value: v, At: at(d)}
	}
	update(t, s, func(tx bot.Tx) error {
		return errors.Join(
			tx.PutFeedback(rate("run-1", "U2", bot.FeedbackUp, 2*time.Second)),
			tx.PutFeedback(rate("run-1", "U1", bot.FeedbackDown, 1*time.Second)),
			tx.PutFeedback(rate("run-10", "U1", bot.FeedbackUp, 0)),
		)
	})
	// U2 changes their mind.
	update(t, s, func(tx bot.Tx) error { return tx.PutFeedback(rate("run-1", "U2", bot.FeedbackDown, 3*time.Second)) })
	tests := []struct {
		runID string
		want  []*bot.Feedback
	}{
		{"run-1", []*bot.Feedback{rate("run-1", "U1", bot.FeedbackDown, time.Second), rate("run-1", "U2", bot.FeedbackDown, 3*time.Second)}},
		{"run-10", []*bot.Feedback{rate("run-10", "U1", bot.FeedbackUp, 0)}},
		{"run-9", nil},
		{"", []*bot.Feedback{rate("run-10", "U1", bot.FeedbackUp, 0), rate("run-1", "U1", bot.FeedbackDown, time.Second), rate("run-1", "U2", bot.FeedbackDown, 3*time.Second)}},
	}
	view(t, s, func(tx bot.Tx) error {
		for _, tt := range tests {
			got, err := tx.Feedback(tt.runID)
			if err != nil {
				return err
			}
			if len(got) == 0 && len(tt.want) == 0 {
				continue
			}
			equal(t, "feedback of run "+tt.runID, got, tt.want)
		}
		return nil
	})
	s.Update(t.Context(), func(tx bot.Tx) error {
		for _, f := range []*bot.Feedback{nil, {RunID: "run-1"}, {User: bot.User{ID: "U1"}}} {
			if err := tx.PutFeedback(f); err == nil {
				t.Errorf("PutFeedback(%s) stored a rating without a run or a user", js(f))
			}
		}
		return nil
	})
}
