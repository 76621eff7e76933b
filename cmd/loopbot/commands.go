package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/loopbot/loopbot/adapters/discord"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/tools"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// runs lists the runs of the database, or shows one run's transcript. It opens the database
// read-only in spirit: it only views, and it fails fast with the lock error when a serving
// loopbot holds the file.
func (m *Main) runs(ctx context.Context) error {
	db, err := store.Open(m.Config.Store.Path, store.WithLockTimeout(time.Duration(m.Config.Store.LockTimeout)))
	if err != nil {
		return err
	}
	defer db.Close()
	if len(m.args) == 2 {
		id := m.args[1]
		var rec *bot.RunRecord
		var audit []bot.AuditEntry
		err := db.View(ctx, func(tx bot.Tx) error {
			var err error
			if rec, err = tx.Run(id); err != nil {
				return err
			}
			audit, err = tx.Audit(id)
			return err
		})
		if errors.Is(err, bot.ErrNotFound) {
			return fmt.Errorf("no run %q in %s", id, m.Config.Store.Path)
		}
		if err != nil {
			return fmt.Errorf("read run: %w", err)
		}
		return writeTranscript(m.Stdout, rec, audit, m.redactor())
	}
	var runs []*bot.RunRecord
	if err := db.View(ctx, func(tx bot.Tx) error {
		var err error
		runs, err = tx.Runs(bot.RunFilter{})
		return err
	}); err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	return writeRuns(m.Stdout, runs, m.redactor())
}

// check validates the configuration (ParseFlags already did), lists the tools the model will
// see with their risk, and with -online tries each configured credential.
func (m *Main) check(ctx context.Context) error {
	cfg := m.Config
	fmt.Fprintf(m.Stdout, "config: %s: ok\n", orDefault(m.ConfigPath, "(no file: defaults)"))
	fmt.Fprintf(m.Stdout, "database: %s\n", cfg.Store.Path)
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
	floors := map[string]string{}
	if !cfg.modelConfigured() {
		for tool, r := range demoAgentConfig(agent.Config{}).RiskFloor {
			floors[tool] = r.String() + " in demo mode"
		}
	}
	for tool, r := range cfg.Agent.Risk {
		floors[tool] = r
	}
	for _, t := range set.List() {
		risk := t.Risk.String()
		if f, ok := floors[t.Name]; ok {
			risk += " (at least " + f + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", t.Name, risk, t.Source, oneLine(t.Description, 70))
	}
	if err := tw.Flush(); err != nil {
		return err
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
	var failed []string
	for _, c := range m.onlineChecks() {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := c.run(cctx)
		cancel()
		if err != nil {
			failed = append(failed, c.name)
			fmt.Fprintf(m.Stdout, "  %s: FAILED: %v\n", c.name, err)
			continue
		}
		fmt.Fprintf(m.Stdout, "  %s: ok\n", c.name)
	}
	if len(failed) > 0 {
		return fmt.Errorf("online checks failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

type onlineCheck struct {
	name string
	run  func(ctx context.Context) error
}

// onlineChecks are the credential checks of check -online, one per configured service.
func (m *Main) onlineChecks() []onlineCheck {
	cfg := m.Config
	var checks []onlineCheck
	if cfg.modelConfigured() {
		checks = append(checks, onlineCheck{"model endpoint", func(ctx context.Context) error { return pingModel(ctx, cfg) }})
	}
	if cfg.Slack.BotToken != "" {
		checks = append(checks, onlineCheck{"slack auth.test", func(ctx context.Context) error {
			api := slackapi.New(cfg.Slack.BotToken, slackapi.OptionAPIURL(orDefault(cfg.Slack.APIURL, "https://slack.com/api/")))
			resp, err := api.AuthTestContext(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(m.Stdout, "  slack: bot %s in workspace %s\n", resp.User, resp.Team)
			return nil
		}})
	}
	if cfg.Discord.Token != "" {
		checks = append(checks, onlineCheck{"discord /users/@me", func(ctx context.Context) error {
			return discordMe(ctx, cfg.Discord, m.Stdout)
		}})
	}
	return checks
}

// discordMe asks Discord who the bot token belongs to.
func discordMe(ctx context.Context, c DiscordConfig, w io.Writer) error {
	base := strings.TrimRight(orDefault(c.APIURL, "https://discord.com/"), "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v10/users/@me", nil)
	if err != nil {
		return err
	}
	token := c.Token
	if !strings.HasPrefix(token, "Bot ") {
		token = "Bot " + token
	}
	req.Header.Set("Authorization", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return httpStatusError("discord", resp)
	}
	var me struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&me); err != nil {
		return fmt.Errorf("discord /users/@me: %w", err)
	}
	fmt.Fprintf(w, "  discord: bot %s (%s)\n", me.Username, me.ID)
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// httpStatusError turns an unexpected HTTP answer into an error that names the service.
func httpStatusError(what string, resp *http.Response) error {
	return fmt.Errorf("%s answered %s", what, resp.Status)
}

func describeServer(s tools.ServerStatus) string {
	if s.Up {
		return fmt.Sprintf("up, %d tools", s.Tools)
	}
	return "down: " + s.Err
}
