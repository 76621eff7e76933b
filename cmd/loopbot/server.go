package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/tools"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/internal/lazyre"
	"github.com/loopbot/loopbot/store/postgres"
)

// server is the running daemon: the database, the tools, the bot, the platforms and the admin
// endpoint, started in that order and closed in the reverse.
type server struct {
	log *slog.Logger
	db  database
	// adminFile is the database file next to which the admin endpoint is published for
	// `loopbot runs`; "" for PostgreSQL, which that command opens itself.
	adminFile string
	tools     *tools.Set
	agent     *agent.Agent
	bot       *bot.Bot
	closers   []func(context.Context) error

	// stopAdapters ends the contexts the platform adapters run under.
	stopAdapters context.CancelFunc
	adapters     sync.WaitGroup

	adminAddr string
	webAddr   string
}

func startServer(ctx context.Context, cfg Config, log *slog.Logger) (_ *server, err error) {
	s := &server{log: log}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.close(cctx)
		}
	}()

	met := newMetrics()
	if cfg.Store.Backend != backendPostgres {
		s.adminFile = cfg.Store.Path
	}
	s.db, err = openDatabase(ctx, cfg.Store, log, met)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func(context.Context) error { return s.db.Close() })
	met.watchRuns(s.db)
	met.watchFeedback(s.db)

	models, err := s.models(ctx, cfg, met)
	if err != nil {
		return nil, err
	}
	s.tools, err = tools.Build(ctx, cfg.ToolsConfig(), log, tools.WithSamplingModel(models.summarizer))
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func(context.Context) error { return s.tools.Close() })

	acfg := cfg.Agent
	if models.demo {
		acfg = demoAgentConfig(acfg)
	}
	// The agent refuses calls that would carry a secret out of the run; it asks a redactor
	// with the same values and rules as the one the bot posts through, so one definition
	// decides what a secret is.
	bcfg := cfg.Bot
	bcfg.Redact = append(append([]string(nil), cfg.Bot.Redact...), secretValues(cfg)...)
	secrets := bot.NewRedactor(bcfg.Redact)
	opts := []agent.Option{agent.WithLogger(log), agent.WithAbandonHook(met.abandonedTool),
		agent.WithSecretScan(func(text string) bool { return secrets.Redact(text) != text })}
	if models.summarizer != nil {
		opts = append(opts, agent.WithSummarizer(models.summarizer))
	}
	if models.sanity != nil {
		opts = append(opts, agent.WithSanity(models.sanity))
	}
	if models.planner != nil {
		opts = append(opts, agent.WithPlanner(models.planner))
	}
	// The remember tool writes the channel memory in the bot's store; every call of it
	// needs an approval.
	all := append(s.tools.Tools(), bot.NewRememberTool(s.db, bcfg))
	ag, err := agent.New(acfg, models.executor, met.tools(all), opts...)
	if err != nil {
		return nil, err
	}
	met.watchAbandoned(ag)
	s.agent = ag

	adapters, err := s.platforms(cfg, models.demo)
	if err != nil {
		return nil, err
	}
	platforms := make([]bot.Platform, len(adapters))
	for i, a := range adapters {
		platforms[i] = meteredPlatform{Platform: a.Platform, m: met}
	}
	s.bot, err = bot.New(bcfg, s.db, ag, platforms, bot.WithLogger(log),
		bot.WithDecisionHook(func(outcome bot.ApprovalStatus, wait time.Duration) {
			met.approvals.WithLabelValues(string(outcome)).Observe(wait.Seconds())
		}))
	if err != nil {
		return nil, err
	}
	if err := s.bot.Start(ctx); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.bot.Stop)

	if err := s.serveAdmin(cfg.Admin.Addr, met); err != nil {
		return nil, err
	}

	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stopAdapters = cancel
	for _, a := range adapters {
		s.adapters.Go(func() {
			if err := a.run(actx, s.bot); err != nil && actx.Err() == nil {
				log.Error("platform adapter stopped", "platform", a.Name(), "err", err)
			}
		})
	}
	log.Info("loopbot is up", "database", cfg.Store.describe(), "admin", s.adminAddr, "console", s.webAddr, "platforms", len(adapters))
	if models.demo {
		log.Warn("DEMO MODE: no model is configured ([llm] or OPENAI_API_KEY), so a scripted model plays a sample run")
	}
	return s, nil
}

// close stops taking events first, then lets the bot checkpoint its runs, then closes the
// rest.
func (s *server) close(ctx context.Context) error {
	if s.stopAdapters != nil {
		s.stopAdapters()
		s.adapters.Wait()
	}
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	s.closers = nil
	return errors.Join(errs...)
}

// serveAdmin serves /healthz and /metrics.
func (s *server) serveAdmin(addr string, met *metrics) error {
	if addr == "" || addr == "off" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("admin listen: %w", err)
	}
	s.adminAddr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.db.View(ctx, func(bot.Tx) error { return nil }); err != nil {
			http.Error(w, "database: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		// Reads may work while writes fail (a full disk): nothing new can be taken then.
		if err := s.db.WriteError(); err != nil {
			http.Error(w, "database refuses writes: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		// A full disk may still take a small write (a lease, an ack) while a run's
		// checkpoint does not fit: that run is stuck until there is room.
		if err := s.bot.SaveError(); err != nil {
			http.Error(w, "database refuses a run's writes: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", met.reg)
	// `loopbot runs` asks here while this process holds the database file (runsremote.go).
	if s.adminFile != "" {
		token, unpublish, err := publishAdmin(s.adminFile, s.adminAddr)
		if err != nil {
			ln.Close()
			return err
		}
		s.closers = append(s.closers, unpublish)
		runs := runsHandler(s.db, token)
		mux.Handle("/runs", runs)
		mux.Handle("/runs/", runs)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server stopped", "err", err)
		}
	}()
	s.closers = append(s.closers, srv.Shutdown)
	return nil
}

// secretValues are the configured secrets, redacted from everything the bot posts: the
// credentials of each section, and the values of MCP servers' environment variables and
// headers whose names say they hold one.
func secretValues(cfg Config) []string {
	values := []string{cfg.LLM.APIKey, cfg.Web.Token, postgres.URLPassword(cfg.Store.URL),
		cfg.Slack.BotToken, cfg.Slack.AppToken, cfg.Slack.SigningSecret, cfg.Discord.Token, cfg.Discord.PublicKey}
	for _, srv := range cfg.MCP.Servers {
		for _, m := range []map[string]string{srv.Env, srv.Headers} {
			for k, v := range m {
				if secretName.MatchString(k) {
					// "Bearer TOKEN" is posted as the token alone as often as whole.
					values = append(values, v, strings.TrimSpace(strings.TrimPrefix(v, "Bearer ")))
				}
			}
		}
	}
	var out []string
	for _, v := range values {
		// Shorter values would redact ordinary words.
		if len(v) >= 8 && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// secretName matches the names of environment variables and headers that hold credentials.
var secretName = lazyre.New(`(?i)(key|token|secret|passw|auth|cookie|credential|session)`)
