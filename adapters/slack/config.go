package slack

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/loopbot/loopbot/internal/lazyre"
)

// Modes of receiving events.
const (
	// ModeSocket receives events over a Socket Mode websocket the bot opens: no public URL
	// is needed. It takes an app-level token (xapp-) besides the bot token.
	ModeSocket = "socket"
	// ModeHTTP receives events, interactions and slash commands as HTTP requests signed
	// with the app's signing secret, on ListenAddr.
	ModeHTTP = "http"
)

// DefaultCommand is the slash command loopbot answers when Config.Command is empty.
const DefaultCommand = "/loopbot"

// slashName is what Slack accepts as a slash command's name.
var slashName = lazyre.New(`^/[a-z0-9_\-]{1,31}$`)

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// Config is the [slack] section of loopbot's configuration file, which embeds it as it is;
// cmd/loopbot lets the environment (SLACK_BOT_TOKEN, SLACK_APP_TOKEN, SLACK_SIGNING_SECRET)
// override the file's secrets.
type Config struct {
	// Mode is ModeSocket (the default) or ModeHTTP.
	Mode string `toml:"mode"`
	// BotToken is the bot user OAuth token, xoxb-…; always needed.
	BotToken string `toml:"bot_token"`
	// AppToken is the app-level token with connections:write, xapp-…; Socket Mode only.
	AppToken string `toml:"app_token"`
	// SigningSecret verifies that HTTP requests come from Slack; HTTP mode only.
	SigningSecret string `toml:"signing_secret"`
	// APIURL is the Web API base URL, ending in a slash; DefaultAPIURL when empty. A
	// Slack-compatible server (or a test's) can stand in for Slack.
	APIURL string `toml:"api_url"`
	// ListenAddr is where HTTP mode listens, ":3000" when empty. Slack must reach it over
	// HTTPS, through a reverse proxy or tunnel: paths /slack/events, /slack/interactions,
	// /slack/commands.
	ListenAddr string `toml:"listen_addr"`
	// AllowedChannels, if not empty, are the only channel IDs (C…, G…, D…) the adapter
	// passes events from; others are dropped before they reach the bot.
	AllowedChannels []string `toml:"allowed_channels"`
	// Command is the app's slash command, "/loopbot" when empty. Slash commands by any
	// other name are answered with a short note and never start anything.
	Command string `toml:"command"`
	// Assistant says the app has Slack's Agents & AI Apps features (assistant:write): the
	// answer is streamed into the thread with chat.startStream, appendStream and stopStream,
	// and the run's plan shows there as task cards (stream.go); if Slack refuses to stream,
	// the adapter falls back to its Block Kit messages for the rest of the process. A
	// working run also shows as the thread's status (assistant.threads.setStatus), a new
	// assistant thread offers SuggestedPrompts, and answers are rated with Slack's feedback
	// buttons (assistant.go). Off, answers carry plain rating buttons.
	Assistant bool `toml:"assistant"`
	// SuggestedPrompts are offered when a person opens a new thread in the assistant view
	// (Assistant only), at most 4; DefaultSuggestedPrompts when not set, none when empty.
	SuggestedPrompts []string `toml:"suggested_prompts"`
	// DrainTimeout bounds how long Run keeps handling events it has acknowledged after its
	// context ends; 10s when zero.
	DrainTimeout time.Duration `toml:"-"`
}

// withDefaults returns c with unset fields at their defaults.
func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeSocket
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	if !strings.HasSuffix(c.APIURL, "/") {
		c.APIURL += "/"
	}
	if c.Command == "" {
		c.Command = DefaultCommand
	}
	if c.ListenAddr == "" {
		c.ListenAddr = ":3000"
	}
	if c.SuggestedPrompts == nil {
		c.SuggestedPrompts = DefaultSuggestedPrompts
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 10 * time.Second
	}
	return c
}

// validate reports the first field that is missing or wrong, by its name.
func (c Config) validate() error {
	var errs []error
	switch c.Mode {
	case ModeSocket:
		if c.AppToken == "" {
			errs = append(errs, fieldErr("AppToken", "required in socket mode (SLACK_APP_TOKEN, xapp-…)"))
		} else if !strings.HasPrefix(c.AppToken, "xapp-") {
			errs = append(errs, fieldErr("AppToken", "want an app-level token starting with xapp-"))
		}
	case ModeHTTP:
		if c.SigningSecret == "" {
			errs = append(errs, fieldErr("SigningSecret", "required in http mode (SLACK_SIGNING_SECRET)"))
		}
	default:
		errs = append(errs, fieldErr("Mode", "%q, want %q or %q", c.Mode, ModeSocket, ModeHTTP))
	}
	if c.BotToken == "" {
		errs = append(errs, fieldErr("BotToken", "required (SLACK_BOT_TOKEN, xoxb-…)"))
	} else if !strings.HasPrefix(c.BotToken, "xoxb-") {
		errs = append(errs, fieldErr("BotToken", "want a bot token starting with xoxb-"))
	}
	if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fieldErr("APIURL", "%q is not an http(s) URL", c.APIURL))
	}
	if !slashName.MatchString(c.Command) {
		errs = append(errs, fieldErr("Command", "%q is not a slash command name (a / then lowercase letters, digits, - or _)", c.Command))
	}
	if len(c.SuggestedPrompts) > maxSuggestedPrompts {
		errs = append(errs, fieldErr("SuggestedPrompts", "%d prompts; Slack shows at most %d", len(c.SuggestedPrompts), maxSuggestedPrompts))
	}
	for _, p := range c.SuggestedPrompts {
		if strings.TrimSpace(p) == "" {
			errs = append(errs, fieldErr("SuggestedPrompts", "an empty prompt"))
		}
	}
	if c.DrainTimeout < 0 {
		errs = append(errs, fieldErr("DrainTimeout", "must not be negative"))
	}
	for _, ch := range c.AllowedChannels {
		if ch == "" || strings.ContainsAny(ch, " #") {
			errs = append(errs, fieldErr("AllowedChannels", "%q is not a channel ID (C…, G… or D…, not a #name)", ch))
		}
	}
	return errors.Join(errs...)
}

// fieldErr is a validation error that starts with the name of the field it is about.
func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{field}, args...)...)
}
