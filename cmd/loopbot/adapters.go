package main

import (
	"context"
	"fmt"
	"net"

	"github.com/loopbot/loopbot/adapters/discord"
	"github.com/loopbot/loopbot/adapters/slack"
	"github.com/loopbot/loopbot/adapters/web"
	"github.com/loopbot/loopbot/bot"
)

// platform is one configured chat platform: what the bot posts through, and how it receives
// events until its context ends.
type platform struct {
	bot.Platform
	run func(ctx context.Context, b *bot.Bot) error
}

// demoBanner is shown on the console in demo mode.
const demoBanner = "DEMO MODE: no model is configured, so a scripted model plays a sample run. " +
	"Set OPENAI_API_KEY or [llm] in the config file for a real one."

// platforms builds the configured adapters. The web console is served when it is enabled or
// when no chat platform is configured, so that loopbot with no tokens at all is usable.
func (s *server) platforms(cfg Config, demo bool) ([]platform, error) {
	var out []platform
	if cfg.Slack.BotToken != "" {
		a, err := slack.New(cfg.Slack, slack.WithLogger(s.log))
		if err != nil {
			return nil, err
		}
		out = append(out, platform{Platform: a, run: func(ctx context.Context, b *bot.Bot) error { return a.Run(ctx, b) }})
	}
	if cfg.Discord.Token != "" {
		a, err := discord.New(cfg.Discord, discord.WithLogger(s.log))
		if err != nil {
			return nil, err
		}
		out = append(out, platform{Platform: a, run: func(ctx context.Context, b *bot.Bot) error { return a.Run(ctx, b) }})
	}
	if cfg.Web.Enabled || len(out) == 0 {
		wc := cfg.Web.Config
		if demo {
			wc.Banner = demoBanner
		}
		// The console keeps its view in the bot's store, so it survives a restart as the
		// runs do and every replica's console shows it; a history file an older loopbot
		// kept next to the database is imported once.
		opts := []web.Option{web.WithLogger(s.log), web.WithPolicy(cfg.Bot.Policy),
			web.WithHistory(cfg.Store.Path+".console", 0)}
		if vs, ok := s.db.(web.ViewStore); ok {
			opts = append(opts, web.WithViewStore(vs))
		}
		// The console links the files a run wrote to a read-only view of its workspace.
		if ws := s.tools.Workspaces(); ws != nil {
			opts = append(opts, web.WithWorkspaces(ws.Path))
		}
		a, err := web.New(wc, opts...)
		if err != nil {
			return nil, fmt.Errorf("web console: %w", err)
		}
		s.closers = append(s.closers, func(context.Context) error { return a.Close() })
		ln, err := net.Listen("tcp", cfg.Web.Addr)
		if err != nil {
			return nil, fmt.Errorf("web console listen: %w", err)
		}
		s.webAddr = ln.Addr().String()
		s.closers = append(s.closers, func(context.Context) error { ln.Close(); return nil })
		out = append(out, platform{Platform: a, run: func(ctx context.Context, b *bot.Bot) error { return a.Serve(ctx, ln, b) }})
	}
	return out, nil
}
