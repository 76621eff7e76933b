package slack

import "github.com/loopbot/loopbot/bot"

// The status card with the run's autonomy level and momentum, and the check-in a run takes
// when its momentum is low, render like the other cards (golden files status_autonomy and
// checkin_momentum).
func init() {
	goldenMessages["status_autonomy"] = bot.Message{
		Kind: bot.KindStatus, Title: "Fix the flaky test", Text: "Working: shell",
		Footer:  "Step 7 · 42s · 9120 tokens · $0.0210 · careful · momentum 0.62",
		Buttons: []bot.Button{{ID: "c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4", Label: "Cancel", Style: bot.StyleDanger, Confirm: "Cancel this run?"}},
	}
	goldenMessages["checkin_momentum"] = bot.Message{
		Kind: bot.KindQuestion, Title: "The run needs you",
		Text: "Momentum is low (0.25, below 0.30): of the last 8 calls, 6 failed and 0 were rejected. " +
			"The latest failure: read_file: \"docs/design.md\" does not exist in the workspace. Continue, Stop, or reply with guidance.",
		Footer: "Reply in this thread with instructions, or choose:",
		Buttons: []bot.Button{
			{ID: "cont0000000000000000000000000000", Label: "Continue", Style: bot.StylePrimary},
			{ID: "stop0000000000000000000000000000", Label: "Stop", Style: bot.StyleDanger},
		},
	}
}
