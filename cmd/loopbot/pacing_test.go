package main

import (
	"testing"

	"github.com/loopbot/loopbot/adapters/discord"
	"github.com/loopbot/loopbot/adapters/slack"
	"github.com/loopbot/loopbot/adapters/web"
	"github.com/loopbot/loopbot/bot"
)

// TestMeteredPlatformKeepsPacingUnit checks that wrapping an adapter for metrics does not hide
// how the bot must pace it: the console and Discord per thread, Slack per channel.
func TestMeteredPlatformKeepsPacingUnit(t *testing.T) {
	tests := []struct {
		p    bot.Platform
		want bool
	}{
		{&web.Adapter{}, true},
		{&discord.Adapter{}, true},
		{&slack.Adapter{}, false},
	}
	for _, tt := range tests {
		var mp bot.Platform = meteredPlatform{Platform: tt.p, m: newMetrics()}
		tp, ok := mp.(bot.ThreadPaced)
		if got := ok && tp.PacedPerThread(); got != tt.want {
			t.Errorf("%T: paced per thread = %v, want %v", tt.p, got, tt.want)
		}
	}
}
