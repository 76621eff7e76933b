package slack

import (
	"strings"

	"github.com/loopbot/loopbot/bot"
)

// autonomyWords recognises "@loopbot autonomy" and "@loopbot autonomy <level>" in a mention:
// the level (which the bot checks) or "" to ask for the channel's.
func autonomyWords(text string) (level string, ok bool) {
	word, rest, _ := strings.Cut(strings.TrimSpace(text), " ")
	if !strings.EqualFold(word, bot.CommandAutonomy) {
		return "", false
	}
	return strings.TrimSpace(rest), true
}
