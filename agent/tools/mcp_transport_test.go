package tools

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resetMode says which requests a resettingServer answers with a TCP reset.
type resetMode int

const (
	// resetReused resets every request that arrives on a connection that has already served
	// one: the server closed it while idle, but the client wrote into it before it noticed.
	resetReused resetMode = iota
	// resetReusedAfterByte does the same after sending the first bytes of a response.
	resetReusedAfterByte
	// resetFresh resets every request, on the connection it opened.
	resetFresh
)

type connCount struct{ n atomic.Int32 }

type connKey struct{}

// resettingServer serves h, but kills connections as mode says, with a TCP reset (linger
// 0) so the client sees exactly what it sees when it reuses a connection the server closed.
// It counts the requests that reached it and those it reset.
type resettingServer struct {
	*httptest.Server
	requests, resets atomic.Int32
}

func newResettingServer(t *testing.T, mode resetMode, h http.Handler) *resettingServer {
	t.Helper()
	rs := &resettingServer{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.requests.Add(1)
		n := r.Context().Value(connKey{}).(*connCount).n.Add(1)
		if mode == resetFresh || n > 1 {
			rs.resets.Add(1)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			if mode == resetReusedAfterByte {
				conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Le"))
			}
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
			return
		}
		h.ServeHTTP(w, r)
	}))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, &connCount{})
	}
	srv.Start()
	t.Cleanup(srv.Close)
	rs.Server = srv
	return rs
}

// TestMCPHTTPRetriesConnectionClosedWhileIdle runs the real SDK client against a server
// that has closed every connection after its first response: each later message, written
// into a pooled connection, meets a reset before any byte of an answer.
func TestMCPHTTPRetriesConnectionClosedWhileIdle(t *testing.T) {
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return testMCPServer(false) }, nil)
	rs := newResettingServer(t, resetReused, handler)
	m := NewManager(MCPConfig{Servers: []MCPServerConfig{{Name: "idle", URL: rs.URL}}}, quietLogger())
	m.Start(t.Context())
	t.Cleanup(func() { m.Close() })

	if st := m.Status(); len(st) != 1 || !st[0].Up {
		t.Fatalf("status = %+v; want up", st)
	}
	echo := toolByName(t, m.Tools(), "idle__echo")
	for _, text := range []string{"one", "two"} {
		if out, err := call(t, echo, "r1", map[string]any{"text": text}); err != nil || !strings.Contains(out, "echo: "+text) {
			t.Fatalf("echo %s = %q, %v", text, out, err)
		}
	}
	if rs.resets.Load() == 0 {
		t.Fatal("the server reset no connection: the test did not exercise the retry")
	}
}

func postTwice(t *testing.T, url string) (first, second error) {
	t.Helper()
	client := &http.Client{Transport: newMCPHTTPTransport()}
	defer client.CloseIdleConnections()
	for i, errp := range []*error{&first, &second} {
		resp, err := client.Post(url, "application/json", strings.NewReader(`{"n":`+string(rune('0'+i))+`}`))
		if err == nil {
			// Read to the end, so that the connection goes back to the pool.
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		*errp = err
	}
	return first, second
}

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
}

// A request whose response had begun may have been acted on: it is not sent again.
func TestMCPHTTPNoRetryAfterResponseByte(t *testing.T) {
	rs := newResettingServer(t, resetReusedAfterByte, okHandler())
	first, second := postTwice(t, rs.URL)
	if first != nil {
		t.Fatalf("first post: %v", first)
	}
	if second == nil {
		t.Error("second post succeeded; want the reset after the first response byte reported")
	}
	if n := rs.requests.Load(); n != 2 {
		t.Errorf("server got %d requests, want 2: a request answered in part must not be retried", n)
	}
}

// A reset on a new connection is not the idle-close race: the request is not sent again.
func TestMCPHTTPNoRetryOnFreshConnection(t *testing.T) {
	rs := newResettingServer(t, resetFresh, okHandler())
	first, _ := postTwice(t, rs.URL)
	if first == nil {
		t.Error("post on a reset fresh connection succeeded")
	}
	if n := rs.requests.Load(); n != 2 {
		t.Errorf("server got %d requests for two posts, want 2: a fresh connection's failure must not be retried", n)
	}
}

// Node's and uvicorn's servers close idle connections after 5 s; the client must let go first.
func TestMCPHTTPIdleTimeoutBelowServerKeepAlive(t *testing.T) {
	rt := newMCPHTTPTransport().(*retryTransport)
	if d := rt.base.IdleConnTimeout; d <= 0 || d >= 5e9 {
		t.Errorf("idle timeout = %s, want above 0 and below 5s", d)
	}
}

// When the server has closed every pooled connection, the retry does not pick another
// of them: it dials afresh.
func TestMCPHTTPRetryDialsAfresh(t *testing.T) {
	// Two requests held until both arrive leave two connections in the pool.
	var arrived atomic.Int32
	both := make(chan struct{})
	rs := newResettingServer(t, resetReused, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == 2 {
			close(both)
		}
		<-both
		w.Write([]byte("ok"))
	}))
	client := &http.Client{Transport: newMCPHTTPTransport()}
	defer client.CloseIdleConnections()
	post := func() error {
		resp, err := client.Post(rs.URL, "application/json", strings.NewReader(`{}`))
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- post() }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("priming post: %v", err)
		}
	}
	if err := post(); err != nil {
		t.Errorf("post with every pooled connection closed by the server: %v", err)
	}
	if rs.resets.Load() == 0 {
		t.Fatal("no reset happened: the test did not exercise the retry")
	}
}
