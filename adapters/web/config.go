package web

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// Defaults of Config.
const (
	DefaultAddr        = "127.0.0.1:8080"
	DefaultMaxThreads  = 200
	DefaultMaxMessages = 500
)

// minTokenLen keeps a console that is reachable from other machines from being guarded by
// a guessable token.
const minTokenLen = 16

// Config is the console's configuration: the [web] section of loopbot's configuration file,
// which embeds it as it is (LOOPBOT_WEB_TOKEN overrides the file's token).
type Config struct {
	// Addr is the host:port the console listens on, 127.0.0.1:8080 by default. An address
	// other than loopback (":8080", "0.0.0.0:8080", a LAN address) needs Token.
	Addr string `toml:"addr"`
	// Token, if set, is required on every request. It must be at least 16 characters.
	Token string `toml:"token"`
	// Banner is a line shown at the top of every page, e.g. that a scripted model is
	// playing a demo run. Plain text.
	Banner string `toml:"-"`
	// MaxThreads bounds the threads kept in memory (DefaultMaxThreads if zero); past it the
	// thread updated longest ago is forgotten.
	MaxThreads int `toml:"max_threads"`
	// MaxMessages bounds the messages kept per thread (DefaultMaxMessages if zero); past it
	// the oldest is forgotten.
	MaxMessages int `toml:"max_messages"`
}

// check validates c and returns it with defaults filled in. Errors name the field.
func (c Config) check() (Config, error) {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.MaxThreads == 0 {
		c.MaxThreads = DefaultMaxThreads
	}
	if c.MaxMessages == 0 {
		c.MaxMessages = DefaultMaxMessages
	}
	var errs []error
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		errs = append(errs, fmt.Errorf("web addr %q: want host:port: %w", c.Addr, err))
	} else if c.Token == "" && !isLoopbackHost(host) {
		errs = append(errs, fmt.Errorf("web addr %q: not a loopback address, so the console needs web token: refusing to serve it unprotected", c.Addr))
	}
	if c.Token != "" && len(c.Token) < minTokenLen {
		errs = append(errs, fmt.Errorf("web token: want at least %d characters", minTokenLen))
	}
	if strings.ContainsFunc(c.Token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		errs = append(errs, errors.New("web token: must not contain spaces or control characters"))
	}
	if c.MaxThreads < 0 {
		errs = append(errs, fmt.Errorf("web max_threads %d: want a positive number", c.MaxThreads))
	}
	if c.MaxMessages < 0 {
		errs = append(errs, fmt.Errorf("web max_messages %d: want a positive number", c.MaxMessages))
	}
	return c, errors.Join(errs...)
}

// isLoopbackHost reports whether host (from host:port, without brackets) names the loopback
// interface only. An empty host means every interface.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
