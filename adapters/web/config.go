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
	// other than loopback (":8080", "0.0.0.0:8080", a LAN address) needs Users,
	// TrustedProxies or Token.
	Addr string `toml:"addr"`
	// Token, if set, is required on every request. It must be at least 16 characters. It is
	// shared: everyone who holds it is the same person to the console, so it cannot go with
	// Users or TrustedProxies, nor on an exposed console with approver rules.
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

	// Identity: who is who on the console. With none of Users, UsersEnv and
	// TrustedProxies, everyone who reaches the console is one person, "you".

	// Users maps a person's name to their own sign-in token (at least 16 characters). Their
	// user ID is "web:" + name, as the bot's approvers list names them.
	Users map[string]string `toml:"users"`
	// UsersEnv holds more name=token pairs, as ParseUsers reads them; cmd/loopbot fills it
	// from the environment variable LOOPBOT_WEB_USERS, so tokens need not be in the file.
	UsersEnv string `toml:"-"`
	// TrustedProxies are the addresses or networks of an authenticating proxy (such as
	// oauth2-proxy) in front of the console. Only connections from them may name the
	// person in ProxyUserHeader; that header from any other peer is refused.
	TrustedProxies []string `toml:"trusted_proxies"`
	// ProxyUserHeader is the header the proxy names the person in, DefaultProxyUserHeader
	// if empty. oauth2-proxy also sets X-Forwarded-Email.
	ProxyUserHeader string `toml:"proxy_user_header"`
	// Threads is who sees which threads: ThreadsOwn (the default) or ThreadsAll.
	Threads string `toml:"threads"`
	// Viewers are names of people who see every thread, besides the bot's approvers.
	Viewers []string `toml:"viewers"`
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
	if c.ProxyUserHeader == "" {
		c.ProxyUserHeader = DefaultProxyUserHeader
	}
	if c.Threads == "" {
		c.Threads = ThreadsOwn
	}
	var errs []error
	users, err := c.allUsers()
	if err != nil {
		errs = append(errs, err)
	}
	c.Users, c.UsersEnv = users, ""
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		errs = append(errs, fmt.Errorf("web addr %q: want host:port: %w", c.Addr, err))
	} else if !isLoopbackHost(host) && !c.authenticates() {
		errs = append(errs, fmt.Errorf("web addr %q: not a loopback address, so the console needs web users, trusted_proxies or token: refusing to serve it unprotected", c.Addr))
	}
	if c.Token != "" {
		if err := checkToken(c.Token); err != nil {
			errs = append(errs, fmt.Errorf("web token: %w", err))
		}
		if len(c.Users) > 0 || len(c.TrustedProxies) > 0 {
			errs = append(errs, errors.New("web token: a shared token makes everyone one person; with web users or trusted_proxies, leave it empty"))
		}
	}
	if _, err := parseProxies(c.TrustedProxies); err != nil {
		errs = append(errs, err)
	}
	if !validHeaderName(c.ProxyUserHeader) {
		errs = append(errs, fmt.Errorf("web proxy_user_header %q: not a header name", c.ProxyUserHeader))
	}
	if c.Threads != ThreadsOwn && c.Threads != ThreadsAll {
		errs = append(errs, fmt.Errorf("web threads %q: want %q or %q", c.Threads, ThreadsOwn, ThreadsAll))
	}
	for _, v := range c.Viewers {
		if err := checkUserName(v); err != nil {
			errs = append(errs, fmt.Errorf("web viewers %q: %w", v, err))
		}
	}
	if c.MaxThreads < 0 {
		errs = append(errs, fmt.Errorf("web max_threads %d: want a positive number", c.MaxThreads))
	}
	if c.MaxMessages < 0 {
		errs = append(errs, fmt.Errorf("web max_messages %d: want a positive number", c.MaxMessages))
	}
	return c, errors.Join(errs...)
}

// allUsers is Users and UsersEnv together, checked: valid names, good tokens, no name
// twice and no token shared by two people (it could not tell them apart).
func (c Config) allUsers() (map[string]string, error) {
	env, err := ParseUsers(c.UsersEnv)
	if err != nil {
		return nil, fmt.Errorf("LOOPBOT_WEB_USERS: %w", err)
	}
	out := make(map[string]string, len(c.Users)+len(env))
	var errs []error
	for name, tok := range c.Users {
		if err := checkUserName(name); err != nil {
			errs = append(errs, fmt.Errorf("web users %q: %w", name, err))
		} else if err := checkToken(tok); err != nil {
			errs = append(errs, fmt.Errorf("web users %q: token: %w", name, err))
		}
		out[name] = tok
	}
	for name, tok := range env {
		if _, dup := out[name]; dup {
			errs = append(errs, fmt.Errorf("web users %q: both in the file and in LOOPBOT_WEB_USERS", name))
		}
		out[name] = tok
	}
	owner := make(map[string]string, len(out))
	for name, tok := range out {
		if other, dup := owner[tok]; dup {
			a, b := min(name, other), max(name, other)
			errs = append(errs, fmt.Errorf("web users %q and %q: the same token; each person needs their own", a, b))
		}
		owner[tok] = name
	}
	return out, errors.Join(errs...)
}

// authenticates reports whether the console checks a credential on every request.
func (c Config) authenticates() bool {
	return c.Token != "" || len(c.Users) > 0 || len(c.TrustedProxies) > 0
}

// validHeaderName reports whether s is an HTTP header field name (RFC 9110's token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r >= 0x7f || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
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
