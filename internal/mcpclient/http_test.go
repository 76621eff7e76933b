package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestReadEvents(t *testing.T) {
	tests := []struct {
		name, stream string
		want         []string
		lastID       string
	}{
		{"one", "data: {\"a\":1}\n\n", []string{`{"a":1}`}, ""},
		{"lines joined", "data: a\ndata: b\n\n", []string{"a\nb"}, ""},
		{"crlf, ids, comments, event names", ": keepalive\r\nevent: message\r\nid: 4\r\ndata:x\r\n\r\nid: 5\r\ndata: y\r\n\r\n", []string{"x", "y"}, "5"},
		{"no data, no event", "id: 1\n\n\n", nil, "1"},
		{"cut before the blank line", "data: lost\n", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			id, err := readEvents(strings.NewReader(tt.stream), func(b []byte) { got = append(got, string(b)) })
			if err != nil || !slices.Equal(got, tt.want) || id != tt.lastID {
				t.Errorf("events %q, last id %q, %v; want %q, %q", got, id, err, tt.want, tt.lastID)
			}
		})
	}
}

// FuzzReadEvents reads any stream a server may send: never a panic, never an empty event.
func FuzzReadEvents(f *testing.F) {
	f.Add("data: {}\n\n")
	f.Add("id: 1\r\ndata: a\r\ndata: b\r\n\r\n: c\n")
	f.Fuzz(func(t *testing.T, stream string) {
		readEvents(strings.NewReader(stream), func(b []byte) {
			if len(b) == 0 {
				t.Fatal("an empty event delivered")
			}
		})
	})
}

type echoIn struct {
	Text string `json:"text"`
}

func echoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	return s
}

// The SDK's server in each of its reply modes: events (the default), plain JSON, and
// stateless (no session id).
func TestHTTPReplyModes(t *testing.T) {
	for name, opts := range map[string]*mcp.StreamableHTTPOptions{
		"events":    nil,
		"json":      {JSONResponse: true},
		"stateless": {Stateless: true, JSONResponse: true},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, opts))
			defer srv.Close()
			s, err := ConnectHTTP(t.Context(), srv.URL, srv.Client(), Options{Name: "t", Version: "1"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tools, err := s.ListTools(t.Context())
			if err != nil || len(tools) != 1 || tools[0].Name != "echo" || !strings.Contains(string(tools[0].InputSchema), `"text"`) {
				t.Fatalf("tools %+v, %v", tools, err)
			}
			res, err := s.CallTool(t.Context(), "echo", json.RawMessage(`{"text":"hi"}`), nil)
			if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].Text != "echo: hi" {
				t.Fatalf("call %+v, %v", res, err)
			}
		})
	}
}

// A server that forgot the session (it restarted) answers 404: the call and the session end
// with ErrSessionMissing, and Close sends no DELETE for it.
func TestHTTPSessionMissing(t *testing.T) {
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	var forgot atomic.Bool
	var deletes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deletes.Add(1)
		}
		if forgot.Load() && r.Header.Get(headerSession) != "" {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	s, err := ConnectHTTP(t.Context(), srv.URL, srv.Client(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	forgot.Store(true)
	if _, err := s.CallTool(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), nil); !errors.Is(err, ErrSessionMissing) {
		t.Errorf("call = %v, want ErrSessionMissing", err)
	}
	if err := waitEnd(t, s); !errors.Is(err, ErrSessionMissing) {
		t.Errorf("wait = %v", err)
	}
	s.Close()
	if n := deletes.Load(); n != 0 {
		t.Errorf("%d DELETEs for a session the server forgot", n)
	}
}

// Close tells a server that keeps sessions that this one is over.
func TestHTTPCloseDeletesTheSession(t *testing.T) {
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	var deleted atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deleted.Store(r.Header.Get(headerSession))
		}
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	s, err := ConnectHTTP(t.Context(), srv.URL, srv.Client(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if id, _ := deleted.Load().(string); id == "" {
		t.Error("no DELETE with the session id")
	}
}

// A server that goes away ends the session: its stream breaks and cannot be opened again.
func TestHTTPServerGoneEndsTheSession(t *testing.T) {
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil))
	s, err := ConnectHTTP(t.Context(), srv.URL, srv.Client(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv.CloseClientConnections()
	srv.Close()
	if err := waitEnd(t, s); !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("wait = %v, want ErrConnectionClosed", err)
	}
}

// waitEnd waits for the session to end, for ten seconds at most, and returns why it did.
func waitEnd(t *testing.T, s *Session) error {
	t.Helper()
	waited := make(chan error, 1)
	go func() { waited <- s.Wait() }()
	select {
	case err := <-waited:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end")
		return nil
	}
}
