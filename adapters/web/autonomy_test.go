package web

import (
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// TestRenderAutonomy: the status card with the run's autonomy level and momentum, and a
// momentum check-in, render like the other cards (golden files).
func TestRenderAutonomy(t *testing.T) {
	for name, msg := range map[string]bot.Message{
		"status_autonomy": {
			Kind: bot.KindStatus, Title: "Fix the flaky test", Text: "Working: shell",
			Footer:  "Step 7 · 42s · 9120 tokens · $0.0210 · careful · momentum 0.62",
			Buttons: []bot.Button{{ID: "act-cancel-1", Label: "Cancel", Style: bot.StyleDanger, Confirm: "Cancel this run?"}},
		},
		"checkin_momentum": {
			Kind: bot.KindQuestion, Title: "The run needs you",
			Text: "Momentum is low (0.25, below 0.30): of the last 8 calls, 6 failed and 0 were rejected. " +
				"The latest failure: read_file: \"docs/design.md\" does not exist in the workspace. Continue, Stop, or reply with guidance.",
			Footer:  "Reply in this thread with instructions, or choose:",
			Buttons: []bot.Button{{ID: "act-continue", Label: "Continue", Style: bot.StylePrimary}, {ID: "act-stop", Label: "Stop", Style: bot.StyleDanger}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := renderMessage(msg)
			checkSafeHTML(t, got)
			golden(t, name, got)
		})
	}
}
