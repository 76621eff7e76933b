package slack

import (
	"context"
	"fmt"
)

// CheckOnline tries cfg's bot token with Slack's auth.test and says whom it belongs to, such
// as "bot loopbot (U123) in workspace Acme (T123)". It checks cfg as New does first, so a
// configuration Run would refuse fails here too. It posts nothing and opens no Socket Mode
// connection. `loopbot check -online` calls it, so the command needs no Slack client of its
// own.
func CheckOnline(ctx context.Context, cfg Config, opts ...Option) (string, error) {
	a, err := New(cfg, opts...)
	if err != nil {
		return "", err
	}
	r, err := a.api.AuthTestContext(ctx)
	if err != nil {
		return "", fmt.Errorf("auth.test: %w", err)
	}
	return fmt.Sprintf("bot %s (%s) in workspace %s (%s)", r.User, r.UserID, r.Team, r.TeamID), nil
}
