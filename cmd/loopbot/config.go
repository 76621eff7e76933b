package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/tools"
	"github.com/loopbot/loopbot/bot"
)

// Duration is a time.Duration written as a string ("90s", "30m") in the config file.
type Duration time.Duration

// UnmarshalText reads a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("want a duration such as \"90s\" or \"30m\": %w", err)
	}
	if v < 0 {
		return fmt.Errorf("duration %s is negative", v)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as Go prints it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Config is the config file. Every key is documented in config.example.toml, which a test
// keeps in step with this struct.
type Config struct {
	Store   StoreConfig   `toml:"store"`
	Log     LogConfig     `toml:"log"`
	Admin   AdminConfig   `toml:"admin"`
	LLM     LLMConfig     `toml:"llm"`
	Agent   AgentConfig   `toml:"agent"`
	Bot     bot.Config    `toml:"bot"`
	Web     WebConfig     `toml:"web"`
	Slack   SlackConfig   `toml:"slack"`
	Discord DiscordConfig `toml:"discord"`
	Tools   ToolsConfig   `toml:"tools"`
	// MCP lists the MCP servers ([[mcp.servers]]) whose tools the model may use.
	MCP tools.MCPConfig `toml:"mcp"`

	// demoPace is how long the demo model thinks before each reply; not in the file.
	demoPace time.Duration
}

// WebConfig is the [web] section: the local console.
type WebConfig struct {
	// Enabled serves the console even when a chat platform is configured. With no platform
	// configured it is always served.
	Enabled bool   `toml:"enabled"`
	Addr    string `toml:"addr"`
	// Token protects the console; it is required when Addr is not a loopback address.
	Token string `toml:"token"`

	// The console's identity settings, passed to web.Config as they are (see its docs).
	Users           map[string]string `toml:"users"`
	UsersEnv        string            `toml:"-"`
	TrustedProxies  []string          `toml:"trusted_proxies"`
	ProxyUserHeader string            `toml:"proxy_user_header"`
	Threads         string            `toml:"threads"`
	Viewers         []string          `toml:"viewers"`
}

// SlackConfig is the [slack] section. Slack is on when a bot token is set (file or
// SLACK_BOT_TOKEN).
type SlackConfig struct {
	Mode            string   `toml:"mode"`
	BotToken        string   `toml:"bot_token"`
	AppToken        string   `toml:"app_token"`
	SigningSecret   string   `toml:"signing_secret"`
	APIURL          string   `toml:"api_url"`
	ListenAddr      string   `toml:"listen_addr"`
	AllowedChannels []string `toml:"allowed_channels"`
}

// DiscordConfig is the [discord] section. Discord is on when a bot token is set (file or
// DISCORD_BOT_TOKEN).
type DiscordConfig struct {
	Mode           string   `toml:"mode"`
	Token          string   `toml:"token"`
	ApplicationID  string   `toml:"application_id"`
	GuildIDs       []string `toml:"guild_ids"`
	PublicKey      string   `toml:"public_key"`
	APIURL         string   `toml:"api_url"`
	ListenAddr     string   `toml:"listen_addr"`
	MessageContent bool     `toml:"message_content"`
}

// ToolsConfig is the [tools] section: the built-in tools.
type ToolsConfig struct {
	Workspace string                `toml:"workspace"`
	HTTPFetch tools.HTTPFetchConfig `toml:"http_fetch"`
	Shell     tools.ShellConfig     `toml:"shell"`
	Files     tools.FilesConfig     `toml:"files"`
	Limits    tools.LimitsConfig    `toml:"limits"`
}

// ToolsConfig returns the configuration of package tools: [tools] and [mcp] together.
func (c Config) ToolsConfig() tools.Config {
	return tools.Config{Workspace: c.Tools.Workspace, HTTPFetch: c.Tools.HTTPFetch, Shell: c.Tools.Shell, Files: c.Tools.Files, MCP: c.MCP,
		Limits: c.Tools.Limits}
}

// StoreConfig is the [store] section.
type StoreConfig struct {
	Path        string   `toml:"path"`
	LockTimeout Duration `toml:"lock_timeout"`
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

// LLMConfig is the [llm] section: the executor model and the cheap models.
type LLMConfig struct {
	BaseURL    string      `toml:"base_url"`
	APIKey     string      `toml:"api_key"`
	Model      string      `toml:"model"`
	Azure      bool        `toml:"azure"`
	APIVersion string      `toml:"api_version"`
	MaxRetries int         `toml:"max_retries"`
	Stream     bool        `toml:"stream"`
	Timeout    Duration    `toml:"timeout"`
	Price      PriceConfig `toml:"price"`
	Summarizer RoleConfig  `toml:"summarizer"`
	Sanity     RoleConfig  `toml:"sanity"`
}

// PriceConfig is what a model costs, in US dollars per million tokens.
type PriceConfig struct {
	PromptPerMillion     float64 `toml:"prompt_per_million"`
	CompletionPerMillion float64 `toml:"completion_per_million"`
	CachedPerMillion     float64 `toml:"cached_per_million"`
}

// RoleConfig names a cheap model for a side role; it shares the endpoint of [llm].
type RoleConfig struct {
	Model string      `toml:"model"`
	Price PriceConfig `toml:"price"`
}

// AgentConfig is the [agent] section: the loop's budgets and policies.
type AgentConfig struct {
	SystemPrompt           string            `toml:"system_prompt"`
	MaxSteps               int               `toml:"max_steps"`
	MaxWall                Duration          `toml:"max_wall"`
	MaxTokens              int               `toml:"max_tokens"`
	MaxCost                float64           `toml:"max_cost"`
	NearLimit              float64           `toml:"near_limit"`
	ToolTimeout            Duration          `toml:"tool_timeout"`
	AbandonAfter           Duration          `toml:"abandon_after"`
	MaxArgBytes            int               `toml:"max_arg_bytes"`
	MaxParallel            int               `toml:"max_parallel"`
	MaxToolRetries         int               `toml:"max_tool_retries"`
	MaxConsecutiveFailures int               `toml:"max_consecutive_failures"`
	FailureHandling        string            `toml:"failure_handling"`
	StuckThreshold         int               `toml:"stuck_threshold"`
	ContextTokens          int               `toml:"context_tokens"`
	KeepRecent             int               `toml:"keep_recent"`
	ContextStrategy        string            `toml:"context_strategy"`
	TruncateChars          int               `toml:"truncate_chars"`
	SanityEvery            int               `toml:"sanity_every"`
	SanityAfterFailures    bool              `toml:"sanity_after_failures"`
	ConfirmCautious        bool              `toml:"confirm_cautious"`
	LowMomentum            int               `toml:"low_momentum"`
	Risk                   map[string]string `toml:"risk"`
}

// DefaultConfig is the configuration with no file at all.
func DefaultConfig() Config {
	return Config{
		Store:    StoreConfig{Path: "loopbot.db", LockTimeout: Duration(time.Second)},
		Log:      LogConfig{Level: "info", Format: "text"},
		Admin:    AdminConfig{Addr: "127.0.0.1:9090"},
		Web:      WebConfig{Addr: "127.0.0.1:8080"},
		demoPace: 800 * time.Millisecond,
		LLM:      LLMConfig{Model: "gpt-4o-mini", MaxRetries: 4, Timeout: Duration(2 * time.Minute)},
		Tools: ToolsConfig{
			Workspace: "loopbot-workspaces",
			HTTPFetch: tools.HTTPFetchConfig{Enabled: true},
			Shell:     tools.ShellConfig{Enabled: true},
			Files:     tools.FilesConfig{Enabled: true},
		},
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

// decodeConfig decodes TOML strictly and turns the library's errors into lines that say
// file:line:column and the key.
func decodeConfig(path string, data []byte, cfg *Config) error {
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(cfg)
	if err == nil {
		return nil
	}
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		var lines []string
		for _, e := range strict.Errors {
			row, col := e.Position()
			lines = append(lines, fmt.Sprintf("%s:%d:%d: unknown key %q", path, row, col, strings.Join(e.Key(), ".")))
		}
		return errors.New(strings.Join(lines, "\n"))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		key := strings.Join(de.Key(), ".")
		if key != "" {
			return fmt.Errorf("%s:%d:%d: key %q: %s", path, row, col, key, de.Error())
		}
		return fmt.Errorf("%s:%d:%d: %s", path, row, col, de.Error())
	}
	return fmt.Errorf("%s: %w", path, err)
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
	if c.Store.Path == "" {
		errs = append(errs, errors.New("store.path is empty"))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level %q: want debug, info, warn or error", c.Log.Level))
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		errs = append(errs, fmt.Errorf("log.format %q: want text or json", c.Log.Format))
	}
	if _, err := c.AgentConfig(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Bot.Check(); err != nil {
		errs = append(errs, fmt.Errorf("bot: %w", err))
	}
	if err := c.ToolsConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// AgentConfig turns the [agent] section into the loop's configuration.
func (c Config) AgentConfig() (agent.Config, error) {
	a := c.Agent
	out := agent.Config{
		SystemPrompt:           a.SystemPrompt,
		MaxSteps:               a.MaxSteps,
		MaxWall:                time.Duration(a.MaxWall),
		MaxTokens:              a.MaxTokens,
		MaxCost:                a.MaxCost,
		NearLimit:              a.NearLimit,
		ToolTimeout:            time.Duration(a.ToolTimeout),
		AbandonAfter:           time.Duration(a.AbandonAfter),
		MaxArgBytes:            a.MaxArgBytes,
		MaxParallel:            a.MaxParallel,
		MaxToolRetries:         a.MaxToolRetries,
		MaxConsecutiveFailures: a.MaxConsecutiveFailures,
		FailureHandling:        a.FailureHandling,
		StuckThreshold:         a.StuckThreshold,
		ContextTokens:          a.ContextTokens,
		KeepRecent:             a.KeepRecent,
		ContextStrategy:        a.ContextStrategy,
		TruncateChars:          a.TruncateChars,
		SanityEvery:            a.SanityEvery,
		SanityAfterFailures:    a.SanityAfterFailures,
		ConfirmCautious:        a.ConfirmCautious,
		LowMomentum:            a.LowMomentum,
	}
	for tool, name := range a.Risk {
		r, err := agent.ParseRisk(name)
		if err != nil {
			return out, fmt.Errorf("agent.risk.%s: %w", tool, err)
		}
		if out.RiskFloor == nil {
			out.RiskFloor = map[string]agent.Risk{}
		}
		out.RiskFloor[tool] = r
	}
	if err := out.Check(); err != nil {
		return out, fmt.Errorf("agent: %w", err)
	}
	return out, nil
}
