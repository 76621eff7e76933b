package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/loopbot/loopbot/bot"
)

// Who a request comes from is decided here and nowhere else: by the credential the request
// carries (a per-user token, or a trusted proxy's header from the proxy's own address), or,
// on a console that cannot tell people apart, by fixing one identity for everyone. Names in
// request bodies and query strings are never read.

// identityMode is how the console learns who a request comes from.
type identityMode int

const (
	// modeSingle: a loopback console with no users configured, or one guarded by a single
	// shared token. Everyone who reaches it is the same person, singleName.
	modeSingle identityMode = iota
	// modeUsers: every person signs in with their own token from Config.Users.
	modeUsers
	// modeProxy: an authenticating proxy in front of the console names the person in a
	// header, read only on connections from Config.TrustedProxies. Per-user tokens, if
	// configured, work beside it.
	modeProxy
)

func (m identityMode) String() string {
	switch m {
	case modeUsers:
		return "per-user tokens"
	case modeProxy:
		return "trusted proxy"
	}
	return "single person"
}

// singleName is the one identity of a console that cannot tell people apart.
const singleName = "you"

// DefaultProxyUserHeader is the header an authenticating proxy names the person in, by the
// oauth2-proxy convention (its --set-xauthrequest and --pass-user-headers options).
const DefaultProxyUserHeader = "X-Forwarded-User"

// maxUserName bounds a user name, in bytes: room for an e-mail address.
const maxUserName = 128

// identity is the person a request was authenticated as.
type identity struct {
	name string
}

// user is the identity as the bot knows it.
func (id identity) user() bot.User { return bot.User{ID: userPrefix + id.name, Name: id.name} }

// id is the identity's user ID, "web:" + name.
func (id identity) id() string { return userPrefix + id.name }

type identityKey struct{}

func withIdentity(ctx context.Context, id identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// requestIdentity is who r was authenticated as by the guard. A request that did not pass
// the guard has none, and gets the zero identity, which sees nothing.
func requestIdentity(r *http.Request) (identity, bool) {
	id, ok := r.Context().Value(identityKey{}).(identity)
	return id, ok && id.name != ""
}

// authenticator holds what the guard checks credentials against. It is built once by New
// and only read after.
type authenticator struct {
	mode identityMode
	// shared is the hash of Config.Token, for modeSingle with a token.
	shared    [sha256.Size]byte
	hasShared bool
	// users are the per-user tokens' hashes, in a fixed order.
	users []userToken
	// proxies are the addresses whose identity header is believed.
	proxies []netip.Prefix
	header  string
}

type userToken struct {
	name string
	hash [sha256.Size]byte
}

func newAuthenticator(c Config) (*authenticator, error) {
	a := &authenticator{header: c.ProxyUserHeader}
	proxies, err := parseProxies(c.TrustedProxies)
	if err != nil {
		return nil, err
	}
	a.proxies = proxies
	names := make([]string, 0, len(c.Users))
	for name := range c.Users {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		a.users = append(a.users, userToken{name: name, hash: sha256.Sum256([]byte(c.Users[name]))})
	}
	switch {
	case len(a.proxies) > 0:
		a.mode = modeProxy
	case len(a.users) > 0:
		a.mode = modeUsers
	default:
		a.mode = modeSingle
		if c.Token != "" {
			a.shared, a.hasShared = sha256.Sum256([]byte(c.Token)), true
		}
	}
	return a, nil
}

// errUntrustedProxyHeader answers a request that names a user in the proxy's header but
// does not come from the proxy.
var errUntrustedProxyHeader = errors.New("identity header from a peer that is not a trusted proxy")

// errNoCredential and errBadCredential answer a request that must sign in.
var (
	errNoCredential  = errors.New("no credential")
	errBadCredential = errors.New("wrong token")
)

// authenticate decides who r comes from. tok is the token r carries (cookie or bearer), ""
// if none.
func (a *authenticator) authenticate(r *http.Request, tok string) (identity, error) {
	if a.mode == modeProxy {
		values := r.Header.Values(a.header)
		if len(values) > 0 {
			if !a.fromProxy(r.RemoteAddr) {
				return identity{}, errUntrustedProxyHeader
			}
			name, ok := proxyUser(values)
			if !ok {
				return identity{}, errBadCredential
			}
			return identity{name: name}, nil
		}
	}
	if a.mode == modeSingle && !a.hasShared {
		return identity{name: singleName}, nil
	}
	if tok == "" {
		return identity{}, errNoCredential
	}
	if name, ok := a.token(tok); ok {
		return identity{name: name}, nil
	}
	return identity{}, errBadCredential
}

// token finds the person tok belongs to. Every configured token is compared, in constant
// time, so neither the answer's time nor its order tells a guesser how close they came.
func (a *authenticator) token(tok string) (string, bool) {
	got := sha256.Sum256([]byte(tok))
	if a.hasShared {
		return singleName, subtle.ConstantTimeCompare(got[:], a.shared[:]) == 1
	}
	found := -1
	for i, u := range a.users {
		if subtle.ConstantTimeCompare(got[:], u.hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return a.users[found].name, true
}

// fromProxy reports whether remoteAddr (an http.Request's RemoteAddr) is a trusted proxy.
func (a *authenticator) fromProxy(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	return slices.ContainsFunc(a.proxies, func(p netip.Prefix) bool { return p.Contains(ip) })
}

// proxyUser reads the person's name from the proxy's header values. More than one value,
// or one that is no valid user name, is refused rather than guessed at.
func proxyUser(values []string) (string, bool) {
	if len(values) != 1 {
		return "", false
	}
	name := strings.TrimSpace(values[0])
	if checkUserName(name) != nil {
		return "", false
	}
	return name, true
}

// parseProxies reads Config.TrustedProxies: addresses ("10.0.0.5", "::1") or networks
// ("10.0.0.0/24").
func parseProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Errorf("web trusted_proxies %q: want an IP address or a network such as 10.0.0.0/24", s)
		}
		ip = ip.Unmap()
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out, nil
}

// checkUserName reports why name cannot be a console user's name: it is the user ID's
// tail, shown in threads and matched against the bot's approvers list.
func checkUserName(name string) error {
	switch {
	case name == "":
		return errors.New("empty user name")
	case len(name) > maxUserName:
		return fmt.Errorf("user name over %d bytes", maxUserName)
	case !utf8.ValidString(name):
		return errors.New("user name is not valid UTF-8")
	case strings.ContainsFunc(name, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '=' || r == ',' }):
		return errors.New("user name: letters, digits and punctuation other than = and , only")
	}
	return nil
}

// checkToken reports why tok cannot guard a console.
func checkToken(tok string) error {
	if len(tok) < minTokenLen {
		return fmt.Errorf("want at least %d characters", minTokenLen)
	}
	if strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f || r == ',' }) {
		return errors.New("must not contain spaces, commas or control characters")
	}
	return nil
}

// ParseUsers reads per-user tokens written as name=token pairs separated by commas, spaces
// or line breaks, as in the environment variable LOOPBOT_WEB_USERS. Each name and token is
// checked as in the config file; a name given twice is an error. Errors never repeat a
// token.
func ParseUsers(s string) (map[string]string, error) {
	out := map[string]string{}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	for i, f := range fields {
		name, tok, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("web users entry %d: want name=token", i+1)
		}
		if err := checkUserName(name); err != nil {
			return nil, fmt.Errorf("web users entry %d: %w", i+1, err)
		}
		if err := checkToken(tok); err != nil {
			return nil, fmt.Errorf("web users %q: token: %w", name, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("web users %q: given twice", name)
		}
		out[name] = tok
	}
	return out, nil
}

// bearerToken is the token of an Authorization: Bearer header, "" if there is none.
func bearerToken(h string) string {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// needsIdentity lists the approver rules of p that only mean something when the console
// can tell people apart. dangerous_needs_other counts when unset, since it defaults to on.
func needsIdentity(p bot.Policy) []string {
	var rules []string
	if len(p.Approvers) > 0 {
		rules = append(rules, "approvers")
	}
	if p.ApproveBy == bot.ApproveByApprovers {
		rules = append(rules, `approve_by = "approvers"`)
	}
	if p.DangerousNeedsOther == nil || *p.DangerousNeedsOther {
		rules = append(rules, "dangerous_needs_other")
	}
	return rules
}

// ownerTag is the part of a thread ID that says who started the thread. It is a hash of the
// user ID, so the console can tell a thread's owner after a restart, when the bot posts
// to threads it no longer holds, without keeping anything.
func ownerTag(userID string) string {
	h := sha256.Sum256([]byte("loopbot web thread owner\x00" + userID))
	return hex.EncodeToString(h[:12])
}

// newThreadID is a fresh thread ID for a thread that userID starts.
func newThreadID(userID string) string { return randomID(8) + "-" + ownerTag(userID) }

// ownedBy reports whether the thread with ID threadID was started by userID.
func ownedBy(threadID, userID string) bool {
	_, tag, ok := strings.Cut(threadID, "-")
	return ok && tag == ownerTag(userID)
}

// Who may see which threads (Config.Threads).
const (
	// ThreadsOwn: a person sees the threads they started; the bot's approvers and
	// Config.Viewers see every thread, since approvers may decide on any run.
	ThreadsOwn = "own"
	// ThreadsAll: everyone signed in sees every thread.
	ThreadsAll = "all"
)

// mayView reports whether who may see the thread threadID, its messages and its cards.
func (a *Adapter) mayView(who identity, threadID string) bool {
	if who.name == "" {
		return false
	}
	return a.cfg.Threads == ThreadsAll || a.auth.mode == modeSingle ||
		ownedBy(threadID, who.id()) || slices.Contains(a.seeAll, who.id())
}
