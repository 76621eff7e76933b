package tools

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/loopbot/loopbot/agent"
)

// Tools pass the call's idempotency key (agent.Invocation.IdempotencyKey, "run/call") on to
// the services they call, so that a call the loop cannot tell ran (a crash or a takeover in
// the middle of it, reported to the model as of unknown outcome) is not done twice by a
// service that remembers keys, should the model or a person make it again under the same
// call. The key is the same in every replica, since both IDs are stored with the run.

// headerIdempotencyKey is the request header of draft-ietf-httpapi-idempotency-key-header.
const headerIdempotencyKey = "Idempotency-Key"

// metaIdempotencyKey is the _meta key an MCP tool call carries the key in. MCP defines no
// key for it; a prefix of our own keeps it out of the protocol's reserved names.
const metaIdempotencyKey = "loopbot/idempotency-key"

// idempotencyKey is inv's key, or "" for a call made outside a run (a test, a direct call),
// which has none worth passing on.
func idempotencyKey(inv agent.Invocation) string {
	if inv.RunID == "" || inv.CallID == "" {
		return ""
	}
	return inv.IdempotencyKey()
}

// sendsIdempotencyKey reports whether a request of method carries the key: every method but
// those HTTP defines as safe (GET, HEAD, OPTIONS), which change nothing a key would guard.
func sendsIdempotencyKey(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// sfString writes s as a Structured Field String (RFC 8941, section 3.3.3), the header's
// syntax: quoted, with backslash and quote escaped. Bytes a String cannot hold (controls,
// non-ASCII) are written as %XX, which keeps the value the same for the same key.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e || c == '%':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
