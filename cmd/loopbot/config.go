package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/loopbot/loopbot/adapters/discord"
	"github.com/loopbot/loopbot/adapters/slack"
	"github.com/loopbot/loopbot/adapters/web"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/tools"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// Config is the config file. Each section is the Config of the package it configures, with
// that package's toml tags, so there is nothing to copy between them; only the sections
// about the command itself (store, log, admin) are its own. Every key is documented in
// config.example.toml, which a test keeps in step with this struct.
type Config struct {
	Store   StoreConfig    `toml:"store"`
	Log     LogConfig      `toml:"log"`
	Admin   AdminConfig    `toml:"admin"`
	LLM     LLMConfig      `toml:"llm"`
	Agent   agent.Config   `toml:"agent"`
	Bot     bot.Config     `toml:"bot"`
	Web     WebConfig      `toml:"web"`
	Slack   slack.Config   `toml:"slack"`
	Discord discord.Config `toml:"discord"`
	Tools   tools.Config   `toml:"tools"`
	// MCP lists the MCP servers ([[mcp.servers]]) whose tools the model may use. It is
	// tools.Config's MCP, a section of its own in the file.
	MCP tools.MCPConfig `toml:"mcp"`

	// demoPace is how long the demo model thinks before each reply; not in the file.
	demoPace time.Duration
}

// WebConfig is the [web] section: the console's configuration, and whether to serve it
// beside a chat platform, which is the command's choice rather than the console's.
type WebConfig struct {
	web.Config
	// Enabled serves the console even when a chat platform is configured. With no platform
	// configured it is always served.
	Enabled bool `toml:"enabled"`
}

// LLMConfig is the [llm] section: the executor model, and the cheap models of the side
// roles, which share its endpoint and key.
type LLMConfig struct {
	llm.Config
	Summarizer RoleConfig `toml:"summarizer"`
	Sanity     RoleConfig `toml:"sanity"`
	Planner    RoleConfig `toml:"planner"`
}

// RoleConfig names a cheap model for a side role; empty, the role uses the executor.
type RoleConfig struct {
	Model string    `toml:"model"`
	Price llm.Price `toml:"price"`
}

// ToolsConfig returns the configuration of package tools: [tools] and [mcp] together.
func (c Config) ToolsConfig() tools.Config {
	t := c.Tools
	t.MCP = c.MCP
	return t
}

// StoreConfig is the [store] section.
type StoreConfig struct {
	// Backend is "bbolt" (one file, one process) or "postgres" (a database replicas share).
	Backend     string         `toml:"backend"`
	Path        string         `toml:"path"`
	LockTimeout agent.Duration `toml:"lock_timeout"`
	// URL is the PostgreSQL connection string; LOOPBOT_DATABASE_URL overrides it.
	URL string `toml:"url"`
}

// LogConfig is the [log] section.
type LogConfig struct {
	Level  string `toml:"level"`
	Format string `toml:"format"`
}

// AdminConfig is the [admin] section: health and metrics.
type AdminConfig struct {
	Addr string `toml:"addr"`
}

// DefaultConfig is the configuration with no file at all: each package's defaults. The
// sections left at their zero value (agent, bot, slack, discord) take their defaults where
// they are used.
func DefaultConfig() Config {
	return Config{
		Store: StoreConfig{Backend: backendBbolt, Path: "loopbot.db", LockTimeout: agent.Duration(store.DefaultLockTimeout)},
		Log:   LogConfig{Level: "info", Format: "text"},
		Admin: AdminConfig{Addr: "127.0.0.1:9090"},
		Web: WebConfig{Config: web.Config{Addr: web.DefaultAddr, MaxThreads: web.DefaultMaxThreads, MaxMessages: web.DefaultMaxMessages,
			ProxyUserHeader: web.DefaultProxyUserHeader, Threads: web.ThreadsOwn}},
		demoPace: 800 * time.Millisecond,
		LLM:      LLMConfig{Config: llm.DefaultConfig()},
		Tools:    tools.DefaultConfig(),
	}
}

// LoadConfig reads the config file at path over the defaults (an empty path reads none),
// then applies the environment. Unknown keys and wrong types are errors that name the key and
// the line.
func LoadConfig(path string, getenv func(string) string) (Config, error) {
	cfg := DefaultConfig()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("read config: %w", err)
		}
		if err := decodeConfig(path, data, &cfg); err != nil {
			return cfg, err
		}
	}
	cfg.applyEnv(getenv)
	if err := cfg.Check(); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// modelConfigured reports whether a real model endpoint is configured. Without one loopbot
// runs in demo mode with a scripted model.
func (c Config) modelConfigured() bool { return c.LLM.APIKey != "" || c.LLM.BaseURL != "" }

// applyEnv lets the environment override secrets of the file. Flags override both, later.
func (c *Config) applyEnv(getenv func(string) string) {
	if v := getenv("OPENAI_API_KEY"); v != "" {
		c.LLM.APIKey = v
	}
	if v := getenv("OPENAI_BASE_URL"); v != "" {
		c.LLM.BaseURL = v
	}
	for env, dst := range map[string]*string{
		"LOOPBOT_DATABASE_URL": &c.Store.URL,
		"LOOPBOT_WEB_TOKEN":    &c.Web.Token,
		"LOOPBOT_WEB_USERS":    &c.Web.UsersEnv,
		"SLACK_BOT_TOKEN":      &c.Slack.BotToken,
		"SLACK_APP_TOKEN":      &c.Slack.AppToken,
		"SLACK_SIGNING_SECRET": &c.Slack.SigningSecret,
		"DISCORD_BOT_TOKEN":    &c.Discord.Token,
		"DISCORD_PUBLIC_KEY":   &c.Discord.PublicKey,
	} {
		if v := getenv(env); v != "" {
			*dst = v
		}
	}
}

// Check reports values that decode but make no sense.
func (c Config) Check() error {
	var errs []error
	switch c.Store.Backend {
	case backendBbolt:
		if c.Store.Path == "" {
			errs = append(errs, errors.New("store.path is empty"))
		}
	case backendPostgres:
		if c.Store.URL == "" {
			errs = append(errs, errors.New("store.backend is postgres but no URL is set (store.url or LOOPBOT_DATABASE_URL)"))
		}
	default:
		errs = append(errs, fmt.Errorf("store.backend %q: want bbolt or postgres", c.Store.Backend))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level %q: want debug, info, warn or error", c.Log.Level))
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		errs = append(errs, fmt.Errorf("log.format %q: want text or json", c.Log.Format))
	}
	if err := c.Agent.Check(); err != nil {
		errs = append(errs, fmt.Errorf("agent: %w", err))
	}
	if err := c.Bot.Check(); err != nil {
		errs = append(errs, fmt.Errorf("bot: %w", err))
	}
	if err := c.ToolsConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
