package discord

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Modes of connecting to Discord.
const (
	// ModeGateway connects a websocket to Discord's gateway with the bot token.
	ModeGateway = "gateway"
	// ModeHTTP serves an interactions endpoint that Discord POSTs signed interactions to.
	ModeHTTP = "http"
)

// Config is the [discord] section of loopbot's configuration file, which embeds it as it is;
// cmd/loopbot lets the environment (DISCORD_BOT_TOKEN, DISCORD_PUBLIC_KEY) override the
// file's secrets.
type Config struct {
	// Mode is "gateway" (the default) or "http".
	Mode string `toml:"mode"`
	// Token is the bot token, with or without its "Bot " prefix. Both modes need it: posts
	// and edits always go through the bot token.
	Token string `toml:"token"`
	// ApplicationID is the application's ID from the developer portal; commands are
	// registered under it and interaction follow-ups are addressed with it.
	ApplicationID string `toml:"application_id"`
	// GuildIDs, if set, registers the commands in these guilds only (they appear at once);
	// otherwise they are registered globally.
	GuildIDs []string `toml:"guild_ids"`
	// PublicKey is the application's Ed25519 public key in hex; HTTP mode verifies every
	// request with it.
	PublicKey string `toml:"public_key"`
	// APIURL replaces https://discord.com/ in every REST URL (the fake Discord of the tests,
	// a compatible proxy). The gateway's URL comes from the API's /gateway route.
	APIURL string `toml:"api_url"`
	// ListenAddr is where HTTP mode serves the interactions endpoint, e.g. ":8080".
	ListenAddr string `toml:"listen_addr"`
	// MessageContent says the privileged Message Content intent is enabled in the developer
	// portal. Without it the adapter does not request it, and messages in a run's thread
	// reach the bot only when they mention it.
	MessageContent bool `toml:"message_content"`
}

// check validates c and returns it with defaults filled in.
func (c Config) check() (Config, error) {
	if c.Mode == "" {
		c.Mode = ModeGateway
	}
	c.Token = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(c.Token), "Bot "))
	var errs []error
	switch c.Mode {
	case ModeGateway:
	case ModeHTTP:
		if c.ListenAddr == "" {
			errs = append(errs, errors.New("discord listen_addr: required in http mode"))
		}
		if _, err := parsePublicKey(c.PublicKey); err != nil {
			errs = append(errs, fmt.Errorf("discord public_key: %w", err))
		}
	default:
		errs = append(errs, fmt.Errorf("discord mode %q: want %q or %q", c.Mode, ModeGateway, ModeHTTP))
	}
	if c.Token == "" {
		errs = append(errs, errors.New("discord token: required (DISCORD_BOT_TOKEN)"))
	}
	if c.ApplicationID == "" {
		errs = append(errs, errors.New("discord application_id: required"))
	} else if !isSnowflake(c.ApplicationID) {
		errs = append(errs, fmt.Errorf("discord application_id %q: want a numeric ID", c.ApplicationID))
	}
	for _, g := range c.GuildIDs {
		if !isSnowflake(g) {
			errs = append(errs, fmt.Errorf("discord guild_ids: %q is not a numeric ID", g))
		}
	}
	if c.APIURL != "" {
		u, err := url.Parse(c.APIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("discord api_url %q: want an http or https URL", c.APIURL))
		}
	}
	return c, errors.Join(errs...)
}

// parsePublicKey decodes a hex Ed25519 public key.
func parsePublicKey(s string) (ed25519.PublicKey, error) {
	if s == "" {
		return nil, errors.New("required in http mode (DISCORD_PUBLIC_KEY)")
	}
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("want %d bytes in hex", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// isSnowflake reports whether s looks like a Discord ID.
func isSnowflake(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
