package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
)

// ErrBlocked is wrapped by every refusal to reach an internal address.
var ErrBlocked = errors.New("destination is internal")

// internalPrefixes are the ranges no fetch may reach unless the allowlist names them, beyond
// what netip.Addr's own predicates (loopback, private, link-local, multicast, unspecified)
// already catch.
var internalPrefixes = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",          // "this network"; 0.0.0.0 reaches the local host
		"100.64.0.0/10",      // carrier-grade NAT
		"192.0.0.0/24",       // IETF protocol assignments
		"192.0.2.0/24",       // documentation
		"198.18.0.0/15",      // benchmarking
		"198.51.100.0/24",    // documentation
		"203.0.113.0/24",     // documentation
		"240.0.0.0/4",        // reserved, and broadcast
		"::/128",             // unspecified
		"::/96",              // IPv4-compatible (deprecated), which embeds any IPv4 address
		"::ffff:0:0:0/96",    // IPv4-translated (SIIT), which embeds any IPv4 address
		"64:ff9b::/96",       // NAT64, which embeds any IPv4 address
		"64:ff9b:1::/48",     // local-use NAT64
		"100::/64",           // discard
		"2001::/23",          // IETF protocol assignments, Teredo included
		"2001:db8::/32",      // documentation
		"2002::/16",          // 6to4, which embeds any IPv4 address
		"fec0::/10",          // deprecated site-local
		"ff00::/8",           // multicast
		"169.254.0.0/16",     // link-local, cloud metadata
		"fe80::/10",          // link-local
		"fc00::/7",           // unique local
		"127.0.0.0/8",        // loopback
		"::1/128",            // loopback
		"10.0.0.0/8",         // private
		"172.16.0.0/12",      // private
		"192.168.0.0/16",     // private
		"224.0.0.0/4",        // multicast
		"255.255.255.255/32", // broadcast
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// internal reports why an address must not be reached, or "" if it may. An IPv6 address that
// carries an IPv4 one (IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64, 6to4) is judged
// first by the IPv4 address inside, so the reason names it; the ranges of those forms stay
// refused as a whole all the same, since a relay may carry the packet to the address inside.
func internal(a netip.Addr) string {
	a = a.Unmap()
	if v4, form, ok := embeddedIPv4(a); ok {
		if why := internal(v4); why != "" {
			return fmt.Sprintf("%s, as %s %s", why, form, v4)
		}
	}
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsPrivate():
		return "private"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, p := range internalPrefixes {
		if p.Contains(a) {
			return "reserved (" + p.String() + ")"
		}
	}
	return ""
}

// The IPv6 ranges whose addresses carry an IPv4 one.
var (
	ipv4Compatible = netip.MustParsePrefix("::/96")
	ipv4Translated = netip.MustParsePrefix("::ffff:0:0:0/96")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// embeddedIPv4 returns the IPv4 address an IPv6 address carries, and the name of the form
// that carries it.
func embeddedIPv4(a netip.Addr) (netip.Addr, string, bool) {
	if !a.Is6() {
		return netip.Addr{}, "", false
	}
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte(b[i : i+4])) }
	switch {
	case a == netip.IPv6Unspecified() || a == netip.IPv6Loopback():
		return netip.Addr{}, "", false
	case ipv4Compatible.Contains(a):
		return v4(12), "IPv4-compatible", true
	case ipv4Translated.Contains(a):
		return v4(12), "IPv4-translated", true
	case nat64.Contains(a):
		return v4(12), "NAT64", true
	case sixToFour.Contains(a):
		return v4(2), "6to4", true
	}
	return netip.Addr{}, "", false
}

// allowlist holds the internal destinations config lets through.
type allowlist struct {
	prefixes []netip.Prefix
	addrs    map[netip.AddrPort]bool
	hosts    map[string]bool // lower-case host, or host:port
}

// parseAllowlist reads entries that are CIDRs, addresses, address:port pairs, host names or
// host:port pairs.
func parseAllowlist(entries []string) (*allowlist, error) {
	al := &allowlist{addrs: map[netip.AddrPort]bool{}, hosts: map[string]bool{}}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if p, err := netip.ParsePrefix(e); err == nil {
			al.prefixes = append(al.prefixes, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
			al.prefixes = append(al.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		if ap, err := netip.ParseAddrPort(e); err == nil {
			al.addrs[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = true
			continue
		}
		host, port, err := net.SplitHostPort(e)
		if err != nil {
			host, port = e, ""
		}
		if !validHostname(host) {
			return nil, fmt.Errorf("%q is not a CIDR, address or host name", e)
		}
		if port != "" {
			if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
				return nil, fmt.Errorf("%q: bad port", e)
			}
			host += ":" + port
		}
		al.hosts[strings.ToLower(host)] = true
	}
	return al, nil
}

func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

func (al *allowlist) hostAllowed(host, port string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return al.hosts[host] || al.hosts[host+":"+port]
}

func (al *allowlist) addrAllowed(ap netip.AddrPort) bool {
	a := ap.Addr().Unmap()
	if al.addrs[netip.AddrPortFrom(a, ap.Port())] {
		return true
	}
	for _, p := range al.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// lookupFunc resolves a host name; tests replace the system resolver with their own.
type lookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// guardedDialer dials only destinations that are public or allowlisted. The decision is made
// in the dialer's Control hook, on the address the socket is about to connect to, after any
// resolution: a name that resolves (or re-resolves, as in DNS rebinding) to an internal
// address is refused just like the address itself, and nothing is sent before the check.
type guardedDialer struct {
	allow  *allowlist
	lookup lookupFunc
}

func (g *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	hostOK := g.allow.hostAllowed(host, port)
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		return g.check(address, hostOK)
	}}
	var firstErr error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil || errors.Is(err, ErrBlocked) && !errors.Is(firstErr, ErrBlocked) {
			firstErr = err
		}
	}
	return nil, firstErr
}

// check decides on the address a socket is about to connect to. hostOK says the allowlist
// names the host the address was resolved from.
func (g *guardedDialer) check(address string, hostOK bool) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unreadable address %q: %w", address, ErrBlocked)
	}
	if hostOK || g.allow.addrAllowed(ap) {
		return nil
	}
	if why := internal(ap.Addr()); why != "" {
		return fmt.Errorf("refused to connect to %s (%s address; add it to tools.http_fetch.allow to permit): %w", ap, why, ErrBlocked)
	}
	return nil
}

// resolve turns a URL host into addresses. Numeric spellings that C resolvers accept
// (2130706433, 0x7f.0.0.1, 017700000001, 127.1) are decoded here as such, so they are judged as
// the addresses they are and never sent to DNS.
func (g *guardedDialer) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.WithZone("")}, nil
	}
	if a, ok := parseLegacyIPv4(host); ok {
		return []netip.Addr{a}, nil
	}
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", host)
	}
	return addrs, nil
}

// parseLegacyIPv4 decodes the IPv4 forms of inet_aton: one to four parts separated by dots,
// each decimal, octal (leading 0) or hexadecimal (0x), the last part filling the remaining
// bytes.
func parseLegacyIPv4(s string) (netip.Addr, bool) {
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if digits == "" || strings.ContainsAny(digits, "+-_") {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}
