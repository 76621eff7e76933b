package tools

import (
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// mcpIdleTimeout is how long an idle connection to an MCP server is kept for reuse. It is
// below the shortest keep-alive of the servers MCP servers commonly run on: Node's http
// server (the TypeScript SDK's) closes idle connections after 5 s and uvicorn (the Python
// SDK's) after 5 s too, while nginx and cloud load balancers keep them for 60 s or more.
// Closing our end first means a call never writes into a connection the server has
// already closed, short of the race retryTransport covers.
const mcpIdleTimeout = 4 * time.Second

// newMCPHTTPTransport returns the transport for streamable HTTP servers: the default one
// with a short idle timeout, retrying a request that a reused connection lost.
func newMCPHTTPTransport() http.RoundTripper {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.IdleConnTimeout = mcpIdleTimeout
	fresh := base.Clone()
	fresh.DisableKeepAlives = true
	return &retryTransport{base: base, fresh: fresh}
}

// retryTransport sends a request again, once, on a fresh connection when it failed on a
// reused connection before any byte of the response arrived: the server closed that
// connection while it was idle in our pool (its keep-alive ran out just as we reused it),
// so it never processed the request. net/http retries only idempotent requests that way,
// and MCP sends every message as a POST. A failure after the first response byte, or on a
// new connection, is returned as it is: the server may have acted on it.
type retryTransport struct {
	base *http.Transport
	// fresh sends the retries: it keeps no connection, so a retry always dials, even when
	// another request put a connection back into base's pool meanwhile.
	fresh *http.Transport
}

func (r *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reused, answered atomic.Bool
	trace := &httptrace.ClientTrace{
		GotConn:              func(info httptrace.GotConnInfo) { reused.Store(info.Reused) },
		GotFirstResponseByte: func() { answered.Store(true) },
	}
	resp, err := r.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err == nil || !reused.Load() || answered.Load() || req.Context().Err() != nil {
		return resp, err
	}
	again := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return resp, err
		}
		body, berr := req.GetBody()
		if berr != nil {
			return resp, err
		}
		again.Body = body
	}
	// The server closes connections by how long they idled, so the others that idled as
	// long are likely gone too: they are dropped, and the retry dials afresh.
	r.base.CloseIdleConnections()
	return r.fresh.RoundTrip(again)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the pool.
func (r *retryTransport) CloseIdleConnections() {
	r.base.CloseIdleConnections()
	r.fresh.CloseIdleConnections()
}
