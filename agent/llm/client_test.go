package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// sleeps records the waits between attempts instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return nil
}

func (s *sleeps) get() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.d)
}

// newClient builds a client for srv whose waits are recorded, not slept.
func newClient(t *testing.T, srv *llmtest.Server, cfg llm.Config, opts ...llm.Option) (*llm.Client, *sleeps) {
	t.Helper()
	if cfg.BaseURL == "" {
		cfg.BaseURL = srv.URL()
	}
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	s := &sleeps{}
	c, err := llm.New(cfg, append([]llm.Option{llm.WithSleep(s.sleep)}, opts...)...)
	if err != nil {
		t.Fatalf("llm.New: %v", err)
	}
	return c, s
}

var userGoal = agent.Request{Messages: []agent.Message{
	{Role: agent.RoleSystem, Content: "You are loopbot."},
	{Role: agent.RoleUser, Content: "List the files."},
}}

// modes runs a test without and with streaming.
var modes = []struct {
	name   string
	stream bool
}{{"json", false}, {"stream", true}}

func TestCompleteReplies(t *testing.T) {
	tests := []struct {
		name       string
		step       llmtest.Step
		wantText   string
		wantCalls  []agent.ToolCall
		wantFinish string
	}{
		{
			name:       "text",
			step:       llmtest.Text("Here are the files: a.go, b.go. Ünïcode too."),
			wantText:   "Here are the files: a.go, b.go. Ünïcode too.",
			wantFinish: "stop",
		},
		{
			name:       "one tool call",
			step:       llmtest.ToolCalls(llmtest.ToolCall{ID: "call_abc", Name: "list_files", Arguments: `{"dir":"."}`}),
			wantCalls:  []agent.ToolCall{{ID: "call_abc", Name: "list_files", Arguments: `{"dir":"."}`}},
			wantFinish: "tool_calls",
		},
		{
			name: "parallel tool calls",
			step: llmtest.ToolCalls(
				llmtest.ToolCall{ID: "c1", Name: "read_file", Arguments: `{"path":"a.go","note":"quote \" and \\ and é"}`},
				llmtest.ToolCall{ID: "c2", Name: "read_file", Arguments: `{"path":"b.go"}`},
				llmtest.ToolCall{ID: "c3", Name: "list_files", Arguments: `{}`},
			),
			wantCalls: []agent.ToolCall{
				{ID: "c1", Name: "read_file", Arguments: `{"path":"a.go","note":"quote \" and \\ and é"}`},
				{ID: "c2", Name: "read_file", Arguments: `{"path":"b.go"}`},
				{ID: "c3", Name: "list_files", Arguments: `{}`},
			},
			wantFinish: "tool_calls",
		},
		{
			name: "malformed arguments pass through verbatim",
			step: llmtest.ToolCalls(
				llmtest.ToolCall{ID: "m1", Name: "read_file", Arguments: `{"path": "a.go"`},
				llmtest.ToolCall{ID: "m2", Name: "read_file", Arguments: `path=a.go, "x"`},
				llmtest.ToolCall{ID: "m3", Name: "list_files", Arguments: ``},
			),
			wantCalls: []agent.ToolCall{
				{ID: "m1", Name: "read_file", Arguments: `{"path": "a.go"`},
				{ID: "m2", Name: "read_file", Arguments: `path=a.go, "x"`},
				{ID: "m3", Name: "list_files", Arguments: ``},
			},
			wantFinish: "tool_calls",
		},
		{
			name:       "text and a call",
			step:       llmtest.Reply("Reading it now.", llmtest.ToolCall{ID: "r1", Name: "read_file", Arguments: `{"path":"go.mod"}`}),
			wantText:   "Reading it now.",
			wantCalls:  []agent.ToolCall{{ID: "r1", Name: "read_file", Arguments: `{"path":"go.mod"}`}},
			wantFinish: "tool_calls",
		},
		{
			name:       "length cut",
			step:       llmtest.Text("The files are").WithFinishReason("length"),
			wantText:   "The files are",
			wantFinish: "length",
		},
	}
	for _, mode := range modes {
		for _, tt := range tests {
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				srv := llmtest.NewTest(t, tt.step)
				c, _ := newClient(t, srv, llm.Config{Stream: mode.stream})
				reply, err := c.Complete(context.Background(), userGoal)
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				if reply.Message.Role != agent.RoleAssistant {
					t.Errorf("role = %q, want assistant", reply.Message.Role)
				}
				if reply.Message.Content != tt.wantText {
					t.Errorf("content = %q, want %q", reply.Message.Content, tt.wantText)
				}
				if !slices.Equal(reply.Message.ToolCalls, tt.wantCalls) {
					t.Errorf("tool calls = %q\nwant %q", reply.Message.ToolCalls, tt.wantCalls)
				}
				if reply.FinishReason != tt.wantFinish {
					t.Errorf("finish reason = %q, want %q", reply.FinishReason, tt.wantFinish)
				}
				if reply.Usage.Calls != 1 {
					t.Errorf("usage calls = %d, want 1", reply.Usage.Calls)
				}
				reqs := srv.Requests()
				if len(reqs) != 1 {
					t.Fatalf("server got %d requests, want 1", len(reqs))
				}
				if reqs[0].Stream != mode.stream || reqs[0].IncludeUsage != mode.stream {
					t.Errorf("stream = %t, include_usage = %t; want both %t", reqs[0].Stream, reqs[0].IncludeUsage, mode.stream)
				}
			})
		}
	}
}

func TestRequestTranslation(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	req := agent.Request{
		Messages: []agent.Message{
			{Role: agent.RoleSystem, Content: "You are loopbot."},
			{Role: agent.RoleUser, Content: "Read a.go and b.go."},
			{Role: agent.RoleAssistant, Content: "Reading both.", ToolCalls: []agent.ToolCall{
				{ID: "call_1", Name: "read_file", Arguments: `{"path":"a.go"}`},
				{ID: "call_2", Name: "read_file", Arguments: `{"path": "b.go"`},
			}},
			{Role: agent.RoleTool, ToolCallID: "call_1", Name: "read_file", Content: "package a"},
			{Role: agent.RoleTool, ToolCallID: "call_2", Name: "read_file", Content: "Error: arguments are not JSON"},
		},
		Tools: []agent.ToolSpec{
			{Name: "read_file", Description: "Reads a file.", Parameters: schema},
			{Name: "list_files", Description: "Lists files."},
		},
		MaxTokens: 256,
		JSON:      true,
	}
	zero := float32(0)
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			srv := llmtest.NewTest(t, llmtest.Text(`{"ok":true}`))
			c, _ := newClient(t, srv, llm.Config{Model: "llama3.1", Stream: mode.stream, Temperature: &zero})
			if _, err := c.Complete(context.Background(), req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			got := srv.Requests()[0]
			want := []llmtest.Message{
				{Role: "system", Content: "You are loopbot."},
				{Role: "user", Content: "Read a.go and b.go."},
				{Role: "assistant", Content: "Reading both.", ToolCalls: []llmtest.ToolCall{
					{ID: "call_1", Name: "read_file", Arguments: `{"path":"a.go"}`},
					{ID: "call_2", Name: "read_file", Arguments: `{"path": "b.go"`},
				}},
				{Role: "tool", ToolCallID: "call_1", Content: "package a"},
				{Role: "tool", ToolCallID: "call_2", Content: "Error: arguments are not JSON"},
			}
			if len(got.Messages) != len(want) {
				t.Fatalf("sent %d messages, want %d: %+v", len(got.Messages), len(want), got.Messages)
			}
			for i := range want {
				g, w := got.Messages[i], want[i]
				if g.Role != w.Role || g.Content != w.Content || g.ToolCallID != w.ToolCallID || g.Name != w.Name || !slices.Equal(g.ToolCalls, w.ToolCalls) {
					t.Errorf("message %d = %+v\nwant %+v", i, g, w)
				}
			}
			if got.Model != "llama3.1" {
				t.Errorf("model = %q, want llama3.1", got.Model)
			}
			if len(got.Tools) != 2 || got.Tools[0].Name != "read_file" || got.Tools[0].Description != "Reads a file." || got.Tools[1].Name != "list_files" {
				t.Fatalf("tools = %+v", got.Tools)
			}
			if !jsonEqual(t, got.Tools[0].Parameters, schema) {
				t.Errorf("read_file parameters = %s, want %s", got.Tools[0].Parameters, schema)
			}
			if !jsonEqual(t, got.Tools[1].Parameters, json.RawMessage(`{"type":"object","properties":{}}`)) {
				t.Errorf("list_files parameters = %s, want an empty object schema", got.Tools[1].Parameters)
			}
			if got.ResponseFormat != "json_object" {
				t.Errorf("response_format = %q, want json_object", got.ResponseFormat)
			}
			// A server other than OpenAI's gets the widely known max_tokens.
			if got.MaxTokens != 256 || got.MaxCompletionTokens != 0 {
				t.Errorf("max_tokens = %d, max_completion_tokens = %d; want 256 and 0", got.MaxTokens, got.MaxCompletionTokens)
			}
			if got.Temperature == nil || *got.Temperature > 1e-30 {
				t.Errorf("temperature = %v, want (almost exactly) zero sent", got.Temperature)
			}
			if auth := got.Header.Get("Authorization"); auth != "" {
				t.Errorf("Authorization = %q without an API key", auth)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("unmarshal %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// redirect sends every request to the test server, so that a client configured for OpenAI's
// own URL can be tested.
type redirect struct{ to *url.URL }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host, req.Host = r.to.Scheme, r.to.Host, ""
	return http.DefaultTransport.RoundTrip(req)
}

func TestOpenAIDefaults(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.Text("hi"))
	to, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	c, err := llm.New(llm.Config{Model: "gpt-4o-mini", APIKey: "sk-test"}, llm.WithHTTPClient(&http.Client{Transport: redirect{to}}))
	if err != nil {
		t.Fatalf("llm.New: %v", err)
	}
	if _, err := c.Complete(context.Background(), agent.Request{Messages: userGoal.Messages, MaxTokens: 50}); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	got := srv.Requests()[0]
	if got.Path != "/v1/chat/completions" {
		t.Errorf("path = %q, want /v1/chat/completions", got.Path)
	}
	if auth := got.Header.Get("Authorization"); auth != "Bearer sk-test" {
		t.Errorf("Authorization = %q, want the bearer key", auth)
	}
	// OpenAI's reasoning models refuse max_tokens.
	if got.MaxCompletionTokens != 50 || got.MaxTokens != 0 {
		t.Errorf("max_completion_tokens = %d, max_tokens = %d; want 50 and 0", got.MaxCompletionTokens, got.MaxTokens)
	}
	if got.Temperature != nil {
		t.Errorf("temperature = %v sent although none is configured", *got.Temperature)
	}
}

func TestAzure(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.Text("hi"))
	c, _ := newClient(t, srv, llm.Config{
		BaseURL:    strings.TrimSuffix(srv.URL(), "/v1") + "/",
		Azure:      true,
		APIKey:     "azure-key",
		Model:      "gpt-3.5-turbo.prod",
		APIVersion: "2024-06-01",
	})
	if _, err := c.Complete(context.Background(), userGoal); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	got := srv.Requests()[0]
	// The deployment name is used as configured, dots included.
	if want := "/openai/deployments/gpt-3.5-turbo.prod/chat/completions"; got.Path != want {
		t.Errorf("path = %q, want %q", got.Path, want)
	}
	if got.Query != "api-version=2024-06-01" {
		t.Errorf("query = %q, want api-version=2024-06-01", got.Query)
	}
	if k := got.Header.Get("Api-Key"); k != "azure-key" {
		t.Errorf("api-key header = %q, want the key", k)
	}
	if auth := got.Header.Get("Authorization"); auth != "" {
		t.Errorf("Authorization = %q; Azure takes the api-key header", auth)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	date := now.Add(3 * time.Second).Format(http.TimeFormat)
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			srv := llmtest.NewTest(t,
				llmtest.Status(http.StatusTooManyRequests, 2*time.Second),
				llmtest.Status(http.StatusServiceUnavailable, 0).WithHeader("Retry-After", date),
				llmtest.Status(http.StatusTooManyRequests, 0).WithHeader("Retry-After-Ms", "1500"),
				llmtest.Text("done"),
			)
			c, s := newClient(t, srv, llm.Config{Stream: mode.stream}, llm.WithClock(func() time.Time { return now }))
			reply, err := c.Complete(context.Background(), userGoal)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if reply.Message.Content != "done" {
				t.Errorf("content = %q, want done", reply.Message.Content)
			}
			want := []time.Duration{2 * time.Second, 3 * time.Second, 1500 * time.Millisecond}
			if got := s.get(); !slices.Equal(got, want) {
				t.Errorf("waits = %v, want %v (as the endpoint asked)", got, want)
			}
			if n := len(srv.Requests()); n != 4 {
				t.Errorf("server got %d requests, want 4", n)
			}
			if reply.Usage.Calls != 1 {
				t.Errorf("usage calls = %d, want 1: failed attempts are not calls", reply.Usage.Calls)
			}
		})
	}
}

func TestServerErrorsExhausted(t *testing.T) {
	srv := llmtest.NewTest(t,
		llmtest.Status(http.StatusInternalServerError, 0),
		llmtest.Status(http.StatusBadGateway, 0),
		llmtest.Error(http.StatusServiceUnavailable, "overloaded, try later"),
		llmtest.Text("never reached"),
	)
	c, s := newClient(t, srv, llm.Config{MaxRetries: 2})
	_, err := c.Complete(context.Background(), userGoal)
	if err == nil {
		t.Fatal("Complete succeeded; want an error after 3 attempts")
	}
	for _, want := range []string{"gave up after 3 attempts", "503", "overloaded, try later"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	var rl *agent.RateLimitError
	if errors.As(err, &rl) {
		t.Errorf("error %v is a RateLimitError; the endpoint failed, it did not rate limit", err)
	}
	var se *llm.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("error %v is not a StatusError with 503", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("server got %d requests, want 3", n)
	}
	// Exponential backoff with jitter: the k-th wait lies in [b/2, b] for b = 500ms·2^(k-1).
	waits := s.get()
	if len(waits) != 2 {
		t.Fatalf("waits = %v, want 2", waits)
	}
	for i, w := range waits {
		hi := 500 * time.Millisecond << i
		if w < hi/2 || w > hi {
			t.Errorf("wait %d = %s, want within [%s, %s]", i, w, hi/2, hi)
		}
	}
}

func TestRateLimitExhausted(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			srv := llmtest.NewTest(t,
				llmtest.Status(http.StatusTooManyRequests, 7*time.Second),
				llmtest.Error(http.StatusTooManyRequests, "Rate limit reached for requests").WithHeader("Retry-After", "9"),
			)
			c, s := newClient(t, srv, llm.Config{MaxRetries: 1, Stream: mode.stream})
			_, err := c.Complete(context.Background(), userGoal)
			var rl *agent.RateLimitError
			if !errors.As(err, &rl) {
				t.Fatalf("error = %v, want an *agent.RateLimitError", err)
			}
			if rl.RetryAfter != 9*time.Second {
				t.Errorf("RetryAfter = %s, want the last one asked for, 9s", rl.RetryAfter)
			}
			if !strings.Contains(err.Error(), "Rate limit reached for requests") {
				t.Errorf("error %q does not carry the endpoint's message", err)
			}
			if got := s.get(); !slices.Equal(got, []time.Duration{7 * time.Second}) {
				t.Errorf("waits = %v, want [7s]", got)
			}
		})
	}
}

func TestLongRetryAfterNotWaited(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.Status(http.StatusTooManyRequests, 2*time.Hour), llmtest.Text("never reached"))
	c, s := newClient(t, srv, llm.Config{})
	_, err := c.Complete(context.Background(), userGoal)
	var rl *agent.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Hour {
		t.Fatalf("error = %v, want a RateLimitError asking for 2h", err)
	}
	if len(s.get()) != 0 || len(srv.Requests()) != 1 {
		t.Errorf("waits = %v, requests = %d; want no retry", s.get(), len(srv.Requests()))
	}
}

func TestDeadlineShorterThanWait(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.Status(http.StatusServiceUnavailable, 30*time.Second), llmtest.Text("never reached"))
	c, s := newClient(t, srv, llm.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if _, err := c.Complete(ctx, userGoal); err != nil {
		t.Fatalf("Complete with an hour to spare: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Push(llmtest.Status(http.StatusServiceUnavailable, 30*time.Second), llmtest.Text("never reached"))
	_, err := c.Complete(ctx, userGoal)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("error = %v, want the 503 at once: the wait would outlast the deadline", err)
	}
	if got := s.get(); !slices.Equal(got, []time.Duration{30 * time.Second}) {
		t.Errorf("waits = %v, want only the first call's 30s", got)
	}
}

func TestNotRetried(t *testing.T) {
	tests := []struct {
		name string
		step llmtest.Step
		want []string
	}{
		{"400", llmtest.Error(http.StatusBadRequest, "Invalid schema for function 'read_file'"), []string{"400 Bad Request", "Invalid schema for function 'read_file'"}},
		{"401", llmtest.Error(http.StatusUnauthorized, "Incorrect API key provided"), []string{"401 Unauthorized", "Incorrect API key provided"}},
		{"404 not in OpenAI's format", llmtest.Raw(http.StatusNotFound, `{"error":"model \"llama9\" not found, try pulling it first"}`), []string{"404 Not Found", `model \"llama9\" not found`}},
		{"200 that is not JSON", llmtest.InvalidJSON(), []string{"not a chat completion"}},
		{"200 without choices", llmtest.Raw(http.StatusOK, `{"id":"x","choices":[]}`), []string{"no choices"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewTest(t, tt.step, llmtest.Text("never reached"))
			c, s := newClient(t, srv, llm.Config{})
			_, err := c.Complete(context.Background(), userGoal)
			if err == nil {
				t.Fatal("Complete succeeded; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("server got %d requests, want 1: this failure is not retried", n)
			}
			if len(s.get()) != 0 {
				t.Errorf("waited %v before giving up", s.get())
			}
		})
	}
}

func TestStreamErrorsNotRetried(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.InvalidJSON(), llmtest.Text("never reached"))
	c, _ := newClient(t, srv, llm.Config{Stream: true})
	_, err := c.Complete(context.Background(), userGoal)
	if err == nil || !strings.Contains(err.Error(), "read stream") {
		t.Fatalf("error = %v, want a stream decoding error", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
}

func TestTransientFailuresRetried(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		first  llmtest.Step
		cfg    llm.Config
	}{
		{"reply cut short", false, llmtest.Truncate(llmtest.Text("a long enough reply to cut in half")), llm.Config{}},
		{"stream cut short", true, llmtest.Truncate(llmtest.ToolCalls(llmtest.Call("read_file", `{"path":"a.go"}`))), llm.Config{}},
		{"stream ended cleanly but early", true, llmtest.Raw(http.StatusOK, `{"id":"x","choices":[{"index":0,"delta":{"content":"par"}}]}`), llm.Config{}},
		{"attempt timed out", false, llmtest.Hang(), llm.Config{Timeout: agent.Duration(50 * time.Millisecond)}},
		{"stream attempt timed out", true, llmtest.Hang(), llm.Config{Timeout: agent.Duration(50 * time.Millisecond)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewTest(t, tt.first, llmtest.Text("whole"))
			tt.cfg.Stream = tt.stream
			c, s := newClient(t, srv, tt.cfg)
			reply, err := c.Complete(context.Background(), userGoal)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if reply.Message.Content != "whole" || len(reply.Message.ToolCalls) != 0 {
				t.Errorf("reply = %+v, want the second, whole one", reply.Message)
			}
			if n := len(srv.Requests()); n != 2 {
				t.Errorf("server got %d requests, want 2", n)
			}
			if len(s.get()) != 1 {
				t.Errorf("waits = %v, want 1", s.get())
			}
		})
	}
}

func TestAttemptTimeoutExhausted(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.Hang(), llmtest.Hang())
	c, _ := newClient(t, srv, llm.Config{MaxRetries: 1, Timeout: agent.Duration(20 * time.Millisecond)})
	_, err := c.Complete(context.Background(), userGoal)
	if err == nil || !strings.Contains(err.Error(), "attempt timed out after 20ms") {
		t.Fatalf("error = %v, want the attempt timeout named", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not match context.DeadlineExceeded", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const key = "sk-in-the-url-0123456789"
	s := &sleeps{}
	c, err := llm.New(llm.Config{BaseURL: "http://" + addr + "/" + key + "/v1", Model: "m", APIKey: key, MaxRetries: 2}, llm.WithSleep(s.sleep))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(context.Background(), userGoal)
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("error = %v, want connection refused after 3 attempts", err)
	}
	if strings.Contains(err.Error(), key) {
		t.Errorf("error %q contains the API key", err)
	}
}

func TestContextCancellation(t *testing.T) {
	t.Run("while waiting to retry", func(t *testing.T) {
		srv := llmtest.NewTest(t, llmtest.Status(http.StatusInternalServerError, 0), llmtest.Text("never reached"))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		waited := 0
		c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"}, llm.WithSleep(func(ctx context.Context, d time.Duration) error {
			waited++
			cancel()
			return ctx.Err()
		}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Complete(ctx, userGoal)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
		if !strings.Contains(err.Error(), "500") {
			t.Errorf("error %q does not say what was being retried", err)
		}
		if waited != 1 || len(srv.Requests()) != 1 {
			t.Errorf("waited %d times, %d requests; want 1 and 1", waited, len(srv.Requests()))
		}
	})
	for _, mode := range modes {
		t.Run("during a request/"+mode.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv := llmtest.NewTest(t, llmtest.Func(func(llmtest.Request) llmtest.Step {
				cancel()
				return llmtest.Hang()
			}), llmtest.Text("never reached"))
			c, s := newClient(t, srv, llm.Config{Stream: mode.stream})
			_, err := c.Complete(ctx, userGoal)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error = %v, want context.Canceled", err)
			}
			if len(s.get()) != 0 || len(srv.Requests()) != 1 {
				t.Errorf("waits = %v, requests = %d; want no retry", s.get(), len(srv.Requests()))
			}
		})
	}
}

func TestStreamInterleavedParallelCalls(t *testing.T) {
	calls := []llmtest.ToolCall{
		{ID: "call_a", Name: "read_file", Arguments: `{"path":"internal/very/long/path/to/a/file.go","lines":[1,2,3]}`},
		{ID: "call_b", Name: "grep", Arguments: `{"pattern":"func \\w+\\(","paths":["é/ü","b"]}`},
		{ID: "call_c", Name: "list_files", Arguments: `{}`},
	}
	srv := llmtest.NewTest(t, llmtest.Reply("Looking at three things at once.", calls...))
	c, _ := newClient(t, srv, llm.Config{Stream: true})
	reply, err := c.Complete(context.Background(), userGoal)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if reply.Message.Content != "Looking at three things at once." {
		t.Errorf("content = %q", reply.Message.Content)
	}
	var want []agent.ToolCall
	for _, c := range calls {
		want = append(want, agent.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	if !slices.Equal(reply.Message.ToolCalls, want) {
		t.Errorf("tool calls = %q\nwant %q", reply.Message.ToolCalls, want)
	}
	if reply.FinishReason != "tool_calls" {
		t.Errorf("finish reason = %q", reply.FinishReason)
	}
	if reply.Usage.PromptTokens == 0 || reply.Usage.CompletionTokens == 0 {
		t.Errorf("usage = %+v, want the final usage chunk counted", reply.Usage)
	}
}

func TestUsageAndCost(t *testing.T) {
	price := llm.Price{PromptPerMillion: 2, CompletionPerMillion: 8, CachedPerMillion: 0.5}
	tests := []struct {
		name     string
		price    llm.Price
		usage    llmtest.Usage
		wantCost float64
	}{
		{"cached at its own price", price, llmtest.Usage{PromptTokens: 1_000_000, CompletionTokens: 500_000, CachedTokens: 200_000}, 0.8*2 + 0.2*0.5 + 0.5*8},
		{"cached unpriced counts as prompt", llm.Price{PromptPerMillion: 2, CompletionPerMillion: 8}, llmtest.Usage{PromptTokens: 1_000_000, CompletionTokens: 500_000, CachedTokens: 200_000}, 2 + 4},
		{"no price no cost", llm.Price{}, llmtest.Usage{PromptTokens: 1000, CompletionTokens: 10}, 0},
		{"small call", price, llmtest.Usage{PromptTokens: 1234, CompletionTokens: 56}, (1234*2 + 56*8) / 1e6},
	}
	for _, mode := range modes {
		for _, tt := range tests {
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				srv := llmtest.NewTest(t, llmtest.Text("ok").WithUsage(tt.usage))
				c, _ := newClient(t, srv, llm.Config{Stream: mode.stream, Price: tt.price})
				reply, err := c.Complete(context.Background(), userGoal)
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				u := reply.Usage
				if u.PromptTokens != tt.usage.PromptTokens || u.CompletionTokens != tt.usage.CompletionTokens || u.CachedTokens != tt.usage.CachedTokens || u.Calls != 1 {
					t.Errorf("usage = %+v, want tokens %+v and 1 call", u, tt.usage)
				}
				if math.Abs(u.Cost-tt.wantCost) > 1e-12 {
					t.Errorf("cost = %v, want %v", u.Cost, tt.wantCost)
				}
			})
		}
	}
}

// TestUsageTracksContext checks the estimate the scripted server reports, which tests of
// context management rely on: a longer conversation costs more prompt tokens.
func TestUsageTracksContext(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.Text("first"), llmtest.Text("second"))
	c, _ := newClient(t, srv, llm.Config{})
	first, err := c.Complete(context.Background(), userGoal)
	if err != nil {
		t.Fatal(err)
	}
	longer := agent.Request{Messages: append(slices.Clone(userGoal.Messages),
		agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "list_files", Arguments: `{"dir":"."}`}}},
		agent.Message{Role: agent.RoleTool, ToolCallID: "c1", Content: strings.Repeat("file.go\n", 100)},
	)}
	second, err := c.Complete(context.Background(), longer)
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	for i, r := range []agent.Reply{first, second} {
		if want := reqs[i].Chars() / 4; r.Usage.PromptTokens != want {
			t.Errorf("call %d: prompt tokens = %d, want %d (characters/4)", i, r.Usage.PromptTokens, want)
		}
	}
	if second.Usage.PromptTokens <= first.Usage.PromptTokens {
		t.Errorf("prompt tokens %d then %d; want growth with the context", first.Usage.PromptTokens, second.Usage.PromptTokens)
	}
}

func TestAPIKeyNeverInErrors(t *testing.T) {
	const key = "sk-proj-SECRETSECRET0123456789"
	echo := func(code int) llmtest.Step {
		return llmtest.Func(func(r llmtest.Request) llmtest.Step {
			return llmtest.Error(code, "Incorrect API key provided: "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		})
	}
	tests := []struct {
		name   string
		stream bool
		script []llmtest.Step
	}{
		{"401 echoes the key", false, []llmtest.Step{echo(http.StatusUnauthorized)}},
		{"429 echoes the key", false, []llmtest.Step{echo(http.StatusTooManyRequests), echo(http.StatusTooManyRequests)}},
		{"500 echoes the key", true, []llmtest.Step{echo(http.StatusInternalServerError), echo(http.StatusInternalServerError)}},
		{"HTML page with the key", false, []llmtest.Step{llmtest.Raw(http.StatusForbidden, "<html><body>key "+key+" is banned</body></html>")}},
		{"stream error event with the key", true, []llmtest.Step{llmtest.Raw(http.StatusOK, `{"error":{"message":"bad key `+key+`","type":"invalid_request_error"}}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewTest(t, tt.script...)
			c, _ := newClient(t, srv, llm.Config{APIKey: key, MaxRetries: 1, Stream: tt.stream})
			_, err := c.Complete(context.Background(), userGoal)
			if err == nil {
				t.Fatal("Complete succeeded; want an error")
			}
			if h := srv.Requests()[0].Header.Get("Authorization"); h != "Bearer "+key {
				t.Fatalf("the server did not get the key (Authorization %q), so the test proves nothing", h)
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("error %q contains the API key", err)
			}
			if !strings.Contains(err.Error(), "[redacted]") {
				t.Errorf("error %q does not show where the key was removed", err)
			}
			for e := err; e != nil; e = errors.Unwrap(e) {
				if strings.Contains(e.Error(), key) {
					t.Errorf("wrapped error %q contains the API key", e)
				}
			}
		})
	}
	if s := fmt.Sprint(llm.Config{APIKey: key, Model: "m"}); strings.Contains(s, key) {
		t.Errorf("a printed Config shows the key: %s", s)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  llm.Config
		want string
	}{
		{"no model", llm.Config{}, "model is empty"},
		{"azure without URL", llm.Config{Model: "m", Azure: true}, "azure needs base_url"},
		{"relative URL", llm.Config{Model: "m", BaseURL: "localhost:11434/v1"}, "not an http or https URL"},
		{"negative timeout", llm.Config{Model: "m", Timeout: -1}, "timeout is negative"},
		{"negative price", llm.Config{Model: "m", Price: llm.Price{CompletionPerMillion: -1}}, "price is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := llm.New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := llm.New(llm.Config{Model: "llama3.1", BaseURL: "http://localhost:11434/v1"}); err != nil {
		t.Errorf("New for a local server without key: %v", err)
	}
}

func TestNoRetriesWhenDisabled(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.Status(http.StatusInternalServerError, 0), llmtest.Text("never reached"))
	c, s := newClient(t, srv, llm.Config{MaxRetries: -1})
	if _, err := c.Complete(context.Background(), userGoal); err == nil {
		t.Fatal("Complete succeeded; want the 500")
	}
	if len(s.get()) != 0 || len(srv.Requests()) != 1 {
		t.Errorf("waits = %v, requests = %d; want one attempt", s.get(), len(srv.Requests()))
	}
}

func TestBadToolSchema(t *testing.T) {
	srv := llmtest.NewTest(t)
	c, _ := newClient(t, srv, llm.Config{})
	_, err := c.Complete(context.Background(), agent.Request{Messages: userGoal.Messages, Tools: []agent.ToolSpec{{Name: "broken", Parameters: json.RawMessage(`{"type":`)}}})
	if err == nil || !strings.Contains(err.Error(), "tool broken: parameters are not valid JSON") {
		t.Errorf("error = %v, want the broken schema named", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("server got %d requests for an invalid request", n)
	}
}

func TestConcurrentCompletes(t *testing.T) {
	srv := llmtest.NewTest(t)
	srv.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		return llmtest.Text("echo: " + r.LastMessage().Content)
	}))
	c, _ := newClient(t, srv, llm.Config{Stream: true})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			msg := fmt.Sprintf("goal %d", i)
			reply, err := c.Complete(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: msg}}})
			if err == nil && reply.Message.Content != "echo: "+msg {
				err = fmt.Errorf("reply %q to %q", reply.Message.Content, msg)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
}

// TestConnectionsReusedAcrossManyRuns has 16 calls under way at once, twice: the second
// round finds the first round's connections idle and opens none. With the standard
// library's default of two idle connections a host, it would dial 14 again, and every
// step of many runs against a TLS endpoint would pay a handshake.
func TestConnectionsReusedAcrossManyRuns(t *testing.T) {
	const calls = 16
	model := llmtest.New()
	model.SetFallback(llmtest.Text("done"))
	var (
		mu      sync.Mutex
		arrived int
		release chan struct{}
		dialed  atomic.Int32
	)
	// Each round's calls are held until all of them have arrived, so that they need as
	// many connections at once.
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gate := release
		if arrived++; arrived == calls {
			close(release)
		}
		mu.Unlock()
		<-gate
		model.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, _ := newClient(t, model, llm.Config{BaseURL: srv.URL + "/v1"})

	for round := range 2 {
		mu.Lock()
		arrived, release = 0, make(chan struct{})
		mu.Unlock()
		before := dialed.Load()
		var wg sync.WaitGroup
		errs := make([]error, calls)
		for i := range calls {
			wg.Go(func() { _, errs[i] = c.Complete(t.Context(), userGoal) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		want := int32(calls)
		if round > 0 {
			want = 0
		}
		if got := dialed.Load() - before; got != want {
			t.Errorf("round %d: %d connections opened, want %d", round+1, got, want)
		}
	}
}

// TestLargeExchangeThroughSmallBuffers sends a prompt and gets a reply, whole or streamed,
// each far larger than the connections' buffers, with a response header longer than them
// too, through the client's own transport.
func TestLargeExchangeThroughSmallBuffers(t *testing.T) {
	big := strings.Repeat("a line of a long tool output, sent back to the model\n", 1200) // 64 KB
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			srv := llmtest.NewTest(t, llmtest.Text(big).WithHeader("X-Long", strings.Repeat("h", 6000)))
			c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", MaxRetries: -1, Stream: stream})
			if err != nil {
				t.Fatal(err)
			}
			reply, err := c.Complete(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: big}}})
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if reply.Message.Content != big {
				t.Errorf("reply of %d bytes, want the %d sent", len(reply.Message.Content), len(big))
			}
			if got := srv.Requests()[0].Messages[0].Content; got != big {
				t.Errorf("the server got a message of %d bytes, want %d", len(got), len(big))
			}
		})
	}
}
