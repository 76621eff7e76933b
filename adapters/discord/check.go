package discord

import (
	"context"
	"fmt"

	"github.com/bwmarrin/discordgo"
)

// CheckOnline tries cfg's bot token with Discord's /users/@me and says whom it belongs to,
// such as "bot loopbot (42)". It checks cfg as New does first, so a configuration Run would
// refuse fails here too. It registers no commands and opens no gateway connection.
// `loopbot check -online` calls it, so the command needs no Discord client or URL of its own.
func CheckOnline(ctx context.Context, cfg Config, opts ...Option) (string, error) {
	a, err := New(cfg, opts...)
	if err != nil {
		return "", err
	}
	u, err := a.s.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("users/@me: %w", err)
	}
	return fmt.Sprintf("bot %s (%s)", u.Username, u.ID), nil
}
