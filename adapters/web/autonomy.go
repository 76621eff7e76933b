package web

import (
	"strings"

	"github.com/loopbot/loopbot/bot"
)

// consoleAutonomy recognises the console's autonomy command, typed as a message:
// "/loopbot autonomy [level]" or "/autonomy [level]". It returns the level (which the bot
// checks), or "" to ask for the channel's.
func consoleAutonomy(text string) (level string, ok bool) {
	fields := strings.Fields(text)
	if len(fields) > 0 && strings.EqualFold(fields[0], "/loopbot") {
		fields = fields[1:]
	} else if len(fields) > 0 && strings.HasPrefix(fields[0], "/") {
		fields[0] = fields[0][1:]
	} else {
		return "", false
	}
	if len(fields) == 0 || len(fields) > 2 || !strings.EqualFold(fields[0], bot.CommandAutonomy) {
		return "", false
	}
	if len(fields) == 2 {
		level = fields[1]
	}
	return level, true
}
