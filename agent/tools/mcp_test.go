package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loopbot/loopbot/agent"
)

// serverEnv makes the test binary act as a stdio MCP server instead of running tests.
const serverEnv = "LOOPBOT_TEST_MCP_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		err := testMCPServer(true).Run(context.Background(), &mcp.StdioTransport{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type echoIn struct {
	Text string `json:"text" jsonschema:"what to echo"`
}

// testMCPServer offers echo, fail, a tool whose name needs cleaning, and, over stdio, die,
// which ends the server process as a crash would.
func testMCPServer(stdio bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-server", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it broke"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "dotted.name", Description: "A name OpenAI would refuse."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "dotted"}}}, nil, nil
		})
	if stdio {
		mcp.AddTool(s, &mcp.Tool{Name: "die", Description: "Crash the server."},
			func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
				os.Exit(3)
				return nil, nil, nil
			})
	}
	return s
}

func stdioServer(name string) MCPServerConfig {
	return MCPServerConfig{Name: name, Command: os.Args[0], Env: map[string]string{serverEnv: "1"}}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func toolNames(ts []agent.Tool) []string {
	var names []string
	for _, t := range ts {
		names = append(names, t.Info().Spec.Name)
	}
	return names
}

func toolByName(t *testing.T, ts []agent.Tool, name string) agent.Tool {
	t.Helper()
	for _, tool := range ts {
		if tool.Info().Spec.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %s among %v", name, toolNames(ts))
	return nil
}

func TestMCPStdio(t *testing.T) {
	sc := stdioServer("local")
	sc.Deny = []string{"die"}
	sc.ToolRisk = map[string]agent.Risk{"echo": agent.RiskSafe}
	m := NewManager(MCPConfig{Servers: []MCPServerConfig{sc}}, quietLogger())
	m.Start(t.Context())
	t.Cleanup(func() { m.Close() })

	tools := m.Tools()
	if got, want := strings.Join(toolNames(tools), ","), "local__dotted_name,local__echo,local__fail"; got != want {
		t.Fatalf("tools = %s, want %s", got, want)
	}
	echo := toolByName(t, tools, "local__echo")
	info := echo.Info()
	if !strings.Contains(info.Spec.Description, "Echo the text.") || !strings.Contains(string(info.Spec.Parameters), `"text"`) {
		t.Errorf("echo spec = %+v", info.Spec)
	}
	out, err := call(t, echo, "r1", map[string]any{"text": "hi"})
	if err != nil || !strings.Contains(out, "echo: hi") || !strings.Contains(out, "<untrusted_external_content") {
		t.Errorf("echo = %q, %v", out, err)
	}
	if out, err := call(t, toolByName(t, tools, "local__dotted_name"), "r1", map[string]any{"text": ""}); err != nil || !strings.Contains(out, "dotted") {
		t.Errorf("dotted.name = %q, %v", out, err)
	}
	if _, err := call(t, toolByName(t, tools, "local__fail"), "r1", map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), "it broke") {
		t.Errorf("fail = %v; want the server's error text", err)
	}

	risks := map[string]agent.Risk{"local__echo": agent.RiskSafe, "local__fail": agent.RiskConfirm}
	for name, want := range risks {
		if got := toolByName(t, tools, name).Assess(json.RawMessage(`{}`)).Risk; got != want {
			t.Errorf("%s risk = %s, want %s", name, got, want)
		}
	}
	if st := m.Status(); len(st) != 1 || !st[0].Up || st[0].Tools != 3 {
		t.Errorf("status = %+v", st)
	}
}

func TestMCPStreamableHTTP(t *testing.T) {
	var auth atomic.Value
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return testMCPServer(false) }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	m := NewManager(MCPConfig{Servers: []MCPServerConfig{{
		Name: "remote", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer t0k"},
		Allow: []string{"echo"}, Risk: agent.RiskCautious,
	}}}, quietLogger())
	m.Start(t.Context())
	t.Cleanup(func() { m.Close() })

	tools := m.Tools()
	if got := strings.Join(toolNames(tools), ","); got != "remote__echo" {
		t.Fatalf("tools = %s, want only the allowed remote__echo", got)
	}
	out, err := call(t, tools[0], "r1", map[string]any{"text": "over http"})
	if err != nil || !strings.Contains(out, "echo: over http") {
		t.Errorf("echo = %q, %v", out, err)
	}
	if auth.Load() != "Bearer t0k" {
		t.Errorf("server saw Authorization %v", auth.Load())
	}
	if got := tools[0].Assess(nil).Risk; got != agent.RiskCautious {
		t.Errorf("risk = %s, want the server's cautious", got)
	}
}

// controlledSleep replaces the manager's backoff wait: every wait is reported on waits and
// lasts until the test sends on release.
type controlledSleep struct {
	waits   chan time.Duration
	release chan struct{}
}

func newControlledSleep() *controlledSleep {
	return &controlledSleep{waits: make(chan time.Duration, 16), release: make(chan struct{})}
}

func (c *controlledSleep) sleep(ctx context.Context, d time.Duration) error {
	c.waits <- d
	select {
	case <-c.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// receive waits for a value the manager's goroutines send. The bound only turns a hang
// into a failure; no result depends on timing.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

func TestMCPRestartsDeadServer(t *testing.T) {
	cs := newControlledSleep()
	events := make(chan bool, 16)
	m := NewManager(MCPConfig{Servers: []MCPServerConfig{stdioServer("flaky")}, MinBackoff: agent.Duration(time.Second)}, quietLogger())
	m.sleep = cs.sleep
	m.notify = func(_ string, up bool) { events <- up }
	m.Start(t.Context())
	t.Cleanup(func() { m.Close() })
	if !receive(t, events, "server up") {
		t.Fatal("server did not come up")
	}
	tools := m.Tools()
	echo, die := toolByName(t, tools, "flaky__echo"), toolByName(t, tools, "flaky__die")

	if _, err := call(t, die, "r1", map[string]any{"text": ""}); err == nil {
		t.Error("die returned no error")
	}
	if receive(t, events, "server down") {
		t.Fatal("server still up after dying")
	}
	if d := receive(t, cs.waits, "backoff wait"); d != time.Second {
		t.Errorf("first backoff = %s, want 1s", d)
	}
	// While it is down, its tools say so instead of hanging or crashing.
	if _, err := call(t, echo, "r1", map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), "flaky is down") {
		t.Errorf("echo while down = %v", err)
	}
	cs.release <- struct{}{}
	if !receive(t, events, "server up again") {
		t.Fatal("server did not come back")
	}
	if out, err := call(t, echo, "r1", map[string]any{"text": "back"}); err != nil || !strings.Contains(out, "echo: back") {
		t.Errorf("echo after restart = %q, %v", out, err)
	}
}

func TestMCPBackoffForServerThatNeverStarts(t *testing.T) {
	cs := newControlledSleep()
	m := NewManager(MCPConfig{
		Servers:    []MCPServerConfig{{Name: "broken", Command: "/nonexistent/mcp-server"}},
		MinBackoff: agent.Duration(time.Second), MaxBackoff: agent.Duration(5 * time.Second),
	}, quietLogger())
	m.sleep = cs.sleep
	m.Start(t.Context())
	t.Cleanup(func() { m.Close() })

	if n := len(m.Tools()); n != 0 {
		t.Errorf("a server that never started offers %d tools", n)
	}
	if st := m.Status(); len(st) != 1 || st[0].Up || st[0].Err == "" {
		t.Errorf("status = %+v; want down with an error", st)
	}
	for i, want := range []time.Duration{1, 2, 4, 5, 5} {
		if d := receive(t, cs.waits, "backoff wait"); d != want*time.Second {
			t.Errorf("wait %d = %s, want %s", i, d, want*time.Second)
		}
		cs.release <- struct{}{}
	}
}

func TestMCPToolName(t *testing.T) {
	tests := []struct{ server, tool, want string }{
		{"gh", "create_issue", "gh__create_issue"},
		{"fs", "read.file/v2", "fs__read_file_v2"},
		{"s", "ünï", "s___n_"},
		{"long", strings.Repeat("x", 100), "long__" + strings.Repeat("x", 58)},
	}
	for _, tt := range tests {
		got := mcpToolName(tt.server, tt.tool)
		if got != tt.want {
			t.Errorf("mcpToolName(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
		}
	}
}

func TestToolSchemaRejectsBrokenSchemas(t *testing.T) {
	if _, err := toolSchema(map[string]any{"type": 7}); err == nil {
		t.Error("a schema with a numeric type was accepted")
	}
	if raw, err := toolSchema(nil); err != nil || string(raw) != `{"type":"object"}` {
		t.Errorf("toolSchema(nil) = %s, %v", raw, err)
	}
}
