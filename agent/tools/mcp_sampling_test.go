//lint:file-ignore SA1019 MCP sampling is deprecated as of protocol version 2026-07-28 (SEP-2577) but stays
// functional for at least twelve months, and servers in use still sample (issue 16).

package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loopbot/loopbot/agent"
)

// fakeModel answers every request with the same text and usage, and keeps the requests.
type fakeModel struct {
	mu   sync.Mutex
	reqs []agent.Request
	err  error
}

func (f *fakeModel) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	if f.err != nil {
		return agent.Reply{}, f.err
	}
	return agent.Reply{
		Message:      agent.Message{Role: agent.RoleAssistant, Content: "the model says hi"},
		Usage:        agent.Usage{PromptTokens: 30, CompletionTokens: 12, Cost: 0.002, Calls: 1},
		FinishReason: "stop",
	}, nil
}

func (f *fakeModel) requests() []agent.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]agent.Request(nil), f.reqs...)
}

type samplesIn struct {
	Times int `json:"times" jsonschema:"how many sampling requests to make"`
}

// samplingServer offers tools that turn to the client: sample asks the model n times,
// elicit asks the user, caps reports the capabilities the client advertised.
func samplingServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "asking-server", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "sample", Description: "Ask the client's model."},
		func(ctx context.Context, req *mcp.CallToolRequest, in samplesIn) (*mcp.CallToolResult, any, error) {
			var out []string
			for range max(in.Times, 1) {
				res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
					SystemPrompt: "You are a test server.",
					Messages:     []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "say hi"}}},
					MaxTokens:    100000,
				})
				if err != nil {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "sampling failed: " + err.Error()}}}, nil, nil
				}
				out = append(out, res.Content.(*mcp.TextContent).Text+" ("+res.StopReason+")")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(out, "; ")}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "elicit", Description: "Ask the user."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Mode: "form", Message: "Which colour?",
				RequestedSchema: &jsonschemaObject{Type: "object", Properties: map[string]any{"colour": map[string]any{"type": "string"}}},
			})
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "elicitation failed: " + err.Error()}}}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the user chose to " + res.Action}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "caps", Description: "Report the client's capabilities."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			// RootsV2 is what went on the wire: the SDK always marshals the old Roots field.
			c := req.Session.InitializeParams().Capabilities
			seen := map[string]any{}
			if c.RootsV2 != nil {
				seen["roots"] = c.RootsV2
			}
			if c.Sampling != nil {
				seen["sampling"] = c.Sampling
			}
			if c.Elicitation != nil {
				seen["elicitation"] = c.Elicitation
			}
			b, err := json.Marshal(seen)
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
		})
	return s
}

type jsonschemaObject struct {
	Type       string         `json:"type"`
	Properties map[string]any `json:"properties"`
}

// startAsking starts a manager on samplingServer over streamable HTTP, logging into buf.
func startAsking(t *testing.T, buf *bytes.Buffer, opts ...MCPOption) *Manager {
	t.Helper()
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return samplingServer() }, nil)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	log := quietLogger()
	if buf != nil {
		log = slog.New(slog.NewTextHandler(&lockedWriter{w: buf}, nil))
	}
	m := NewManager(MCPConfig{Servers: []MCPServerConfig{{Name: "asks", URL: srv.URL}}}, log, opts...)
	m.Start(t.Context())
	t.Cleanup(func() { m.Close() })
	if st := m.Status(); len(st) != 1 || !st[0].Up {
		t.Fatalf("status = %+v", st)
	}
	return m
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func TestMCPSamplingUsesTheModel(t *testing.T) {
	var logs bytes.Buffer
	model := &fakeModel{}
	m := startAsking(t, &logs, WithSamplingModel(model))

	out, err := call(t, toolByName(t, m.Tools(), "asks__sample"), "run-7", map[string]any{"times": 2})
	if err != nil {
		t.Fatalf("sample: %v", err)
	}
	if !strings.Contains(out, "the model says hi (endTurn); the model says hi (endTurn)") {
		t.Errorf("result = %q; want the model's replies as the server got them", out)
	}
	if !strings.Contains(out, "consulted the model 2 time(s) during this call: 84 tokens, $0.0040") {
		t.Errorf("result = %q; want the sampling usage noted", out)
	}
	reqs := model.requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests, want 2", len(reqs))
	}
	r := reqs[0]
	if len(r.Tools) != 0 || r.MaxTokens != maxSampleTokens || len(r.Messages) != 2 ||
		r.Messages[0].Role != agent.RoleSystem || r.Messages[1].Content != "say hi" {
		t.Errorf("model request = %+v; want the server's messages, no tools, max tokens capped at %d", r, maxSampleTokens)
	}
	if got := logs.String(); strings.Count(got, `msg="mcp sampling"`) != 2 || !strings.Contains(got, "run_id=run-7") || !strings.Contains(got, "completion_tokens=12") {
		t.Errorf("logs = %s; want each sampling logged with its run and usage", got)
	}
}

func TestMCPSamplingLimitPerCall(t *testing.T) {
	model := &fakeModel{}
	m := startAsking(t, nil, WithSamplingModel(model))
	_, err := call(t, toolByName(t, m.Tools(), "asks__sample"), "r1", map[string]any{"times": maxSamplesPerCall + 1})
	if err == nil || !strings.Contains(err.Error(), "at most 8 sampling requests") {
		t.Errorf("sample past the limit = %v; want the server to report loopbot's refusal", err)
	}
	if n := len(model.requests()); n != maxSamplesPerCall {
		t.Errorf("model consulted %d times, want %d", n, maxSamplesPerCall)
	}
}

func TestMCPSamplingModelErrorStaysInside(t *testing.T) {
	model := &fakeModel{err: errors.New("POST https://secret-endpoint.internal/v1: 500")}
	m := startAsking(t, nil, WithSamplingModel(model))
	_, err := call(t, toolByName(t, m.Tools(), "asks__sample"), "r1", map[string]any{"times": 1})
	if err == nil || strings.Contains(err.Error(), "secret-endpoint") || !strings.Contains(err.Error(), "could not answer") {
		t.Errorf("sample with a failing model = %v; want a plain refusal that names no endpoint", err)
	}
}

func TestMCPCapabilitiesAdvertised(t *testing.T) {
	tests := []struct {
		name  string
		opts  []MCPOption
		want  []string
		never []string
	}{
		{"with a sampling model", []MCPOption{WithSamplingModel(&fakeModel{})}, []string{`"sampling":{}`, `"elicitation":{"form":{}}`}, []string{"roots", "url"}},
		{"without", nil, []string{`"elicitation":{"form":{}}`}, []string{"roots", "url", "sampling"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := startAsking(t, nil, tt.opts...)
			out, err := call(t, toolByName(t, m.Tools(), "asks__caps"), "r1", map[string]any{"text": ""})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("capabilities %s lack %s", out, w)
				}
			}
			for _, n := range tt.never {
				if strings.Contains(out, `"`+n+`"`) {
					t.Errorf("capabilities %s advertise %s", out, n)
				}
			}
		})
	}
}

func TestMCPSamplingNotOfferedWithoutModel(t *testing.T) {
	m := startAsking(t, nil)
	_, err := call(t, toolByName(t, m.Tools(), "asks__sample"), "r1", map[string]any{"times": 1})
	if err == nil || !strings.Contains(err.Error(), "sampling failed") {
		t.Errorf("sample without a model = %v; want the server's own failure", err)
	}
}

// TestMCPElicitationDeclined: with nobody to ask (a call made outside a bot's run), the
// server's request for input is declined and the model is told.
func TestMCPElicitationDeclined(t *testing.T) {
	var logs bytes.Buffer
	m := startAsking(t, &logs)
	out, err := call(t, toolByName(t, m.Tools(), "asks__elicit"), "run-9", map[string]any{"text": ""})
	if err != nil {
		t.Fatalf("elicit: %v", err)
	}
	if !strings.Contains(out, "the user chose to decline") {
		t.Errorf("result = %q; want the server to have got a decline", out)
	}
	if !strings.Contains(out, "asked for input from the user during this call: declined: loopbot could not relay it") {
		t.Errorf("result = %q; want loopbot's note telling the model the request was declined", out)
	}
	if got := logs.String(); !strings.Contains(got, `msg="mcp elicitation declined"`) || !strings.Contains(got, "run_id=run-9") || !strings.Contains(got, "Which colour?") {
		t.Errorf("logs = %s", got)
	}
}

// A server may consult the model or the user only while loopbot is calling one of its tools.
func TestMCPRequestsRefusedWithoutCall(t *testing.T) {
	model := &fakeModel{}
	m := NewManager(MCPConfig{}, quietLogger(), WithSamplingModel(model))
	s := &mcpServer{cfg: MCPServerConfig{Name: "idle"}, calls: map[*mcpCall]struct{}{}}
	params := &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}
	if _, err := m.sample(t.Context(), s, &mcp.CreateMessageRequest{Params: params}); !errors.Is(err, errNoCall) {
		t.Errorf("sample without a call = %v, want errNoCall", err)
	}
	if _, err := m.elicit(t.Context(), s, &mcp.ElicitRequest{Params: &mcp.ElicitParams{Message: "?"}}); !errors.Is(err, errNoCall) {
		t.Errorf("elicit without a call = %v, want errNoCall", err)
	}
	if n := len(model.requests()); n != 0 {
		t.Errorf("model consulted %d times", n)
	}
}

func TestSamplingRequest(t *testing.T) {
	msg := func(role string, c mcp.Content) *mcp.SamplingMessage {
		return &mcp.SamplingMessage{Role: mcp.Role(role), Content: c}
	}
	tests := []struct {
		name    string
		params  *mcp.CreateMessageParams
		wantErr bool
		want    string
		max     int
	}{
		{"empty", &mcp.CreateMessageParams{}, true, "", 0},
		{"bad role", &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{msg("system", &mcp.TextContent{Text: "x"})}}, true, "", 0},
		{"image named", &mcp.CreateMessageParams{MaxTokens: 50, Messages: []*mcp.SamplingMessage{
			msg("user", &mcp.TextContent{Text: "look"}), msg("assistant", &mcp.ImageContent{MIMEType: "image/png", Data: []byte{1}}),
		}}, false, "user:look|assistant:[image, image/png, not shown]", 50},
		{"no max takes the cap", &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{msg("user", &mcp.TextContent{Text: "a"})}}, false, "user:a", maxSampleTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := samplingRequest(tt.params)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			var parts []string
			for _, m := range req.Messages {
				parts = append(parts, string(m.Role)+":"+m.Content)
			}
			if got := strings.Join(parts, "|"); got != tt.want || req.MaxTokens != tt.max {
				t.Errorf("got %s max %d, want %s max %d", got, req.MaxTokens, tt.want, tt.max)
			}
		})
	}
}

// FuzzSamplingRequest feeds servers' sampling parameters, as they come off the wire, to the
// conversion: it must refuse or convert, never panic, and never lift the token cap.
func FuzzSamplingRequest(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":100,"systemPrompt":"s"}`)
	f.Add(`{"messages":[{"role":"assistant","content":{"type":"image","mimeType":"image/png","data":"AAAA"}}],"maxTokens":-1}`)
	f.Add(`{"messages":[{"role":"user","content":{"type":"tool_use","id":"1","name":"x","input":{}}}],"maxTokens":99999999}`)
	f.Add(`{"messages":[null]}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var p mcp.CreateMessageParams
		if json.Unmarshal([]byte(raw), &p) != nil {
			return
		}
		req, err := samplingRequest(&p)
		if err != nil {
			return
		}
		if req.MaxTokens <= 0 || req.MaxTokens > maxSampleTokens {
			t.Errorf("max tokens %d outside (0, %d]", req.MaxTokens, maxSampleTokens)
		}
		if len(req.Tools) != 0 {
			t.Error("a sampling request offers tools")
		}
	})
}
