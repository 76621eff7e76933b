package main

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loopbot/loopbot/bot"
)

// feedbackCollector reports the ratings of answers from the store at scrape time: each
// person's latest rating of each answer, by platform and value. Read from the store, the
// figure is right after a restart and follows a person who changes their mind.
type feedbackCollector struct {
	store bot.Store
	desc  *prometheus.Desc
}

func (c feedbackCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c feedbackCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct {
		platform string
		value    bot.FeedbackValue
	}
	counts := map[key]int{}
	err := c.store.View(context.Background(), func(tx bot.Tx) error {
		all, err := tx.Feedback("")
		for _, f := range all {
			counts[key{f.Thread.Platform, f.Value}]++
		}
		return err
	})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), k.platform, string(k.value))
	}
}

func (m *metrics) watchFeedback(s bot.Store) {
	m.reg.MustRegister(feedbackCollector{store: s, desc: prometheus.NewDesc("loopbot_answer_feedback",
		"Ratings of answers in the database (each person's latest), by platform and value (up, down).", []string{"platform", "value"}, nil)})
}
