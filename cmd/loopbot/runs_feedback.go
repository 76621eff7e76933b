package main

import (
	"fmt"

	"github.com/loopbot/loopbot/bot"
)

// feedbackLine sums up the ratings of a run's answer from its audit entries, in which every
// rating a person gave is a "feedback" entry: each person's latest counts. It is "" for an
// answer nobody rated.
func feedbackLine(audit []bot.AuditEntry) string {
	latest := map[string]string{}
	for _, e := range audit {
		if e.Action == "feedback" {
			latest[e.Actor.ID] = e.Detail
		}
	}
	if len(latest) == 0 {
		return ""
	}
	var up, down int
	for _, v := range latest {
		switch bot.FeedbackValue(v) {
		case bot.FeedbackUp:
			up++
		case bot.FeedbackDown:
			down++
		}
	}
	return fmt.Sprintf("Feedback:  %d helpful, %d not helpful\n", up, down)
}
