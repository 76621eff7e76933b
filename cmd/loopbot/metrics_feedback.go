package main

import (
	"context"

	"github.com/loopbot/loopbot/bot"
)

// countFeedback reports the ratings of answers from the store at scrape time: each person's
// latest rating of each answer, by platform and value. Read from the store, the figure is
// right after a restart and follows a person who changes their mind.
func countFeedback(s bot.Store) ([]gaugeSample, error) {
	type key struct {
		platform string
		value    bot.FeedbackValue
	}
	counts := map[key]int{}
	err := s.View(context.Background(), func(tx bot.Tx) error {
		all, err := tx.Feedback("")
		for _, f := range all {
			counts[key{f.Thread.Platform, f.Value}]++
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]gaugeSample, 0, len(counts))
	for k, n := range counts {
		out = append(out, gaugeSample{values: []string{k.platform, string(k.value)}, value: float64(n)})
	}
	return out, nil
}

func (m *metrics) watchFeedback(s bot.Store) {
	m.reg.register(&gaugeFunc{opts: opts{name: "loopbot_answer_feedback",
		help:   "Ratings of answers in the database (each person's latest), by platform and value (up, down).",
		labels: []string{"platform", "value"}},
		collect: func() ([]gaugeSample, error) { return countFeedback(s) }})
}
