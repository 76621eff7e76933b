package tools

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loopbot/loopbot/agent"
)

// keyServer records the Idempotency-Key headers of the requests it gets, by method.
type keyServer struct {
	mu   sync.Mutex
	keys []string // "METHOD value" ("METHOD -" without one)
}

func (k *keyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	vals := r.Header.Values("Idempotency-Key")
	got := "-"
	if len(vals) == 1 {
		got = vals[0]
	} else if len(vals) > 1 {
		got = "several"
	}
	k.mu.Lock()
	k.keys = append(k.keys, r.Method+" "+got)
	k.mu.Unlock()
}

func (k *keyServer) last() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[len(k.keys)-1]
}

// TestHTTPFetchSendsIdempotencyKey: a request that may change something carries the call's
// run/call key, as a Structured Field String; the same call made by another process (a
// replica that took the run over) carries the same key, another call another. Safe methods
// carry none, and a key the model set is kept as the only one.
func TestHTTPFetchSendsIdempotencyKey(t *testing.T) {
	ks := &keyServer{}
	srv := httptest.NewServer(ks)
	t.Cleanup(srv.Close)
	cfg := HTTPFetchConfig{Allow: []string{"127.0.0.1"}, Methods: []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS"}}
	first, takeover := fetchTool(t, cfg), fetchTool(t, cfg)
	do := func(f *HTTPFetch, runID, callID string, args map[string]any) string {
		t.Helper()
		args["url"] = srv.URL
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Call(context.Background(), agent.Invocation{RunID: runID, CallID: callID, Args: raw}); err != nil {
			t.Fatal(err)
		}
		return ks.last()
	}
	tests := []struct {
		name        string
		f           *HTTPFetch
		runID, call string
		args        map[string]any
		want        string
	}{
		{"post", first, "run-1", "call_a", map[string]any{"method": "POST", "body": "{}"}, `POST "run-1/call_a"`},
		{"the same call after a takeover", takeover, "run-1", "call_a", map[string]any{"method": "POST", "body": "{}"}, `POST "run-1/call_a"`},
		{"another call", takeover, "run-1", "call_b", map[string]any{"method": "POST"}, `POST "run-1/call_b"`},
		{"put", first, "run-1", "call_c", map[string]any{"method": "PUT"}, `PUT "run-1/call_c"`},
		{"patch", first, "run-1", "call_d", map[string]any{"method": "PATCH"}, `PATCH "run-1/call_d"`},
		{"delete", first, "run-1", "call_e", map[string]any{"method": "DELETE"}, `DELETE "run-1/call_e"`},
		{"a call ID to escape", first, "run-1", `c"\é`, map[string]any{"method": "POST"}, `POST "run-1/c\"\\%C3%A9"`},
		{"get", first, "run-1", "call_f", map[string]any{}, "GET -"},
		{"head", first, "run-1", "call_g", map[string]any{"method": "HEAD"}, "HEAD -"},
		{"options", first, "run-1", "call_h", map[string]any{"method": "OPTIONS"}, "OPTIONS -"},
		{"the model's own key", first, "run-1", "call_i", map[string]any{"method": "POST", "headers": map[string]string{"Idempotency-Key": "mine"}}, "POST mine"},
		{"outside a run", first, "", "call_j", map[string]any{"method": "POST"}, "POST -"},
	}
	for _, tt := range tests {
		if got := do(tt.f, tt.runID, tt.call, tt.args); got != tt.want {
			t.Errorf("%s: server saw %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestMCPCallCarriesIdempotencyKey: a tool call carries the run/call key in its request's
// _meta, through the official SDK on both ends, the same from two clients (a replica that
// took the run over) for the same call.
func TestMCPCallCarriesIdempotencyKey(t *testing.T) {
	type empty struct{}
	var mu sync.Mutex
	var seen []any
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "charge", Description: "Charge a card."},
			func(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
				mu.Lock()
				seen = append(seen, req.Params.Meta[metaIdempotencyKey])
				mu.Unlock()
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "charged"}}}, nil, nil
			})
		return s
	}, nil)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	client := func() agent.Tool {
		m := NewManager(MCPConfig{Servers: []MCPServerConfig{{Name: "pay", URL: srv.URL}}}, quietLogger())
		m.Start(t.Context())
		t.Cleanup(func() { m.Close() })
		tools := m.Tools()
		if len(tools) != 1 {
			t.Fatalf("tools = %v, want pay__charge", toolNames(tools))
		}
		return tools[0]
	}
	first, takeover := client(), client()
	for _, c := range []struct {
		tool        agent.Tool
		runID, call string
	}{{first, "run-1", "call_a"}, {takeover, "run-1", "call_a"}, {takeover, "run-1", "call_b"}, {first, "", "call_c"}} {
		if _, err := c.tool.Call(context.Background(), agent.Invocation{RunID: c.runID, CallID: c.call, Args: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	want := []any{"run-1/call_a", "run-1/call_a", "run-1/call_b", nil}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(want) {
		t.Fatalf("server saw %d calls, want %d", len(seen), len(want))
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("call %d carried key %v, want %v", i, seen[i], want[i])
		}
	}
}
