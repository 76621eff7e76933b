package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loopbot/loopbot/adapters/discord"
	"github.com/loopbot/loopbot/adapters/slack"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/tools"
	"github.com/loopbot/loopbot/bot"
)

// runs lists the runs of the database, or shows one run's transcript. It only views; when a
// serving loopbot holds the file, it asks that one over its admin endpoint (runsremote.go).
func (m *Main) runs(ctx context.Context) error {
	src, err := m.openRuns()
	if err != nil {
		return err
	}
	defer src.close()
	if len(m.args) == 2 {
		id := m.args[1]
		rec, audit, err := src.run(ctx, id)
		if errors.Is(err, bot.ErrNotFound) {
			return fmt.Errorf("no run %q in %s", id, m.Config.Store.describe())
		}
		if err != nil {
			return fmt.Errorf("read run: %w", err)
		}
		return writeTranscript(m.Stdout, rec, audit, m.redactor())
	}
	runs, err := src.runs(ctx)
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	return writeRuns(m.Stdout, runs, m.redactor())
}

// check validates the configuration (ParseFlags already did), lists the tools the model will
// see with their risk, and with -online tries each configured credential.
func (m *Main) check(ctx context.Context) error {
	cfg := m.Config
	fmt.Fprintf(m.Stdout, "config: %s: ok\n", orDefault(m.ConfigPath, "(no file: defaults)"))
	fmt.Fprintf(m.Stdout, "database: %s (%s)\n", cfg.Store.describe(), cfg.Store.Backend)
	if cfg.modelConfigured() {
		fmt.Fprintf(m.Stdout, "model: %s at %s\n", cfg.LLM.Model, orDefault(cfg.LLM.BaseURL, "https://api.openai.com/v1"))
	} else {
		fmt.Fprintln(m.Stdout, "model: none configured: demo mode (a scripted model plays a sample run)")
	}

	set, err := tools.Build(ctx, cfg.ToolsConfig(), m.Logger)
	if err != nil {
		return err
	}
	defer set.Close()
	fmt.Fprintln(m.Stdout, "\ntools the model will see:")
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tRISK\tSOURCE\tDESCRIPTION")
	fmt.Fprintln(tw, "  update_plan\tsafe\tloop\tkeep the checklist shown as progress")
	fmt.Fprintln(tw, "  ask_user\tsafe\tloop\task the person a question and wait")
	fmt.Fprintln(tw, "  read_output\tsafe\tloop\tread the part of an earlier tool result that was cut")
	floors := map[string]string{}
	if !cfg.modelConfigured() {
		for tool, r := range demoAgentConfig(agent.Config{}).RiskFloor {
			floors[tool] = r.String() + " in demo mode"
		}
	}
	for tool, r := range cfg.Agent.RiskFloor {
		floors[tool] = r.String()
	}
	fmt.Fprintln(tw, "  remember\tconfirm\tbot\tpropose a fact for the channel's memory (always asks)")
	names := []string{"update_plan", "ask_user", bot.RememberName}
	for _, t := range set.List() {
		names = append(names, t.Name)
		risk := t.Risk.String()
		if f, ok := floors[t.Name]; ok {
			risk += " (at least " + f + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", t.Name, risk, t.Source, oneLine(t.Description, 70))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeShellWarnings(m.Stdout, shellProblems(cfg.Tools.Shell))
	if dir := cfg.Bot.Playbooks.Dir; dir != "" {
		pbs, errs := bot.LoadPlaybooks(dir, names)
		fmt.Fprintf(m.Stdout, "\nplaybooks in %s:\n%s\n", dir, bot.PlaybookList(pbs, errs))
		if len(errs) > 0 {
			return fmt.Errorf("%d invalid playbook(s) in %s", len(errs), dir)
		}
	}
	if cfg.Discord.ApplicationID != "" {
		fmt.Fprintf(m.Stdout, "discord invite URL: %s\n", discord.InviteURL(cfg.Discord.ApplicationID))
	}
	if mgr := set.MCP(); mgr != nil {
		for _, s := range mgr.Status() {
			fmt.Fprintf(m.Stdout, "mcp server %s: %s\n", s.Name, describeServer(s))
		}
	}
	if !m.online {
		return nil
	}
	fmt.Fprintln(m.Stdout, "\nonline checks:")
	checks := m.onlineChecks()
	if len(checks) == 0 {
		fmt.Fprintln(m.Stdout, "  nothing to check: no model endpoint ([llm] or OPENAI_API_KEY), Slack ([slack] or SLACK_BOT_TOKEN) or Discord ([discord] or DISCORD_BOT_TOKEN) is configured")
		return errors.New("check -online: nothing is configured to check")
	}
	var failed []string
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		who, err := c.run(cctx)
		cancel()
		if err != nil {
			failed = append(failed, c.name)
			var me *llm.ModelError
			if errors.As(err, &me) {
				fmt.Fprintf(m.Stdout, "  %s: FAILED: %s\n    %v\n", c.name, me.SafeSummary(), err)
				continue
			}
			fmt.Fprintf(m.Stdout, "  %s: FAILED: %v\n", c.name, err)
			continue
		}
		if who != "" {
			fmt.Fprintf(m.Stdout, "  %s: ok: %s\n", c.name, who)
			continue
		}
		fmt.Fprintf(m.Stdout, "  %s: ok\n", c.name)
	}
	if len(failed) > 0 {
		return fmt.Errorf("online checks failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

// onlineCheck tries one credential; run says whom it belongs to when it can.
type onlineCheck struct {
	name string
	run  func(ctx context.Context) (who string, err error)
}

// onlineChecks are the credential checks of check -online, one per configured service. Each
// chat adapter checks its own credentials, so the command knows no platform's API.
func (m *Main) onlineChecks() []onlineCheck {
	cfg := m.Config
	var checks []onlineCheck
	if cfg.Store.Backend == backendPostgres {
		checks = append(checks, onlineCheck{"database", func(ctx context.Context) (string, error) { return probeDatabase(ctx, cfg.Store) }})
	}
	if cfg.modelConfigured() {
		checks = append(checks, onlineCheck{"model endpoint", func(ctx context.Context) (string, error) { return "", pingModel(ctx, cfg) }})
	}
	if cfg.Slack.BotToken != "" {
		checks = append(checks, onlineCheck{"slack", func(ctx context.Context) (string, error) {
			return slack.CheckOnline(ctx, cfg.Slack, slack.WithLogger(m.Logger))
		}})
	}
	if cfg.Discord.Token != "" {
		checks = append(checks, onlineCheck{"discord", func(ctx context.Context) (string, error) {
			return discord.CheckOnline(ctx, cfg.Discord, discord.WithLogger(m.Logger))
		}})
	}
	return checks
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func describeServer(s tools.ServerStatus) string {
	if s.Up {
		return fmt.Sprintf("up, %d tools", s.Tools)
	}
	return "down: " + s.Err
}
