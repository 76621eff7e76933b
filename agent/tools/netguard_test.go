package tools

import (
	"net/netip"
	"strings"
	"testing"
)

// TestInternalEmbeddedIPv4 checks the IPv6 forms that carry an IPv4 address: each is refused,
// and the reason names the address inside when that one is internal.
func TestInternalEmbeddedIPv4(t *testing.T) {
	tests := []struct {
		addr string
		want string // part of the reason; "" means the address may be reached
	}{
		{"::127.0.0.1", "loopback, as IPv4-compatible 127.0.0.1"},
		{"::7f00:1", "loopback, as IPv4-compatible 127.0.0.1"},
		{"::10.0.0.1", "private, as IPv4-compatible 10.0.0.1"},
		{"::169.254.169.254", "link-local, as IPv4-compatible 169.254.169.254"},
		{"::8.8.8.8", "reserved (::/96)"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:0:127.0.0.1", "loopback, as IPv4-translated 127.0.0.1"},
		{"::ffff:0:8.8.8.8", "reserved (::ffff:0:0:0/96)"},
		{"64:ff9b::127.0.0.1", "loopback, as NAT64 127.0.0.1"},
		{"64:ff9b::192.168.1.1", "private, as NAT64 192.168.1.1"},
		{"2002:7f00:1::", "loopback, as 6to4 127.0.0.1"},
		{"2002:a9fe:a9fe::1", "link-local, as 6to4 169.254.169.254"},
		{"2002:0808:0808::1", "reserved (2002::/16)"},
		{"::1", "loopback"},
		{"::", "unspecified"},
		{"2606:4700::1111", ""},
		{"8.8.8.8", ""},
	}
	for _, tt := range tests {
		got := internal(netip.MustParseAddr(tt.addr))
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("internal(%s) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}
