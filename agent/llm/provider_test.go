package llm_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// replayClient is a client of an llmtest server that replays body to the first request; it
// fails the test if it waits to try again.
func replayClient(t *testing.T, srv *llmtest.Server, stream bool) *llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "test-model", Stream: stream, APIKey: "sk-test-key"},
		llm.WithSleep(func(ctx context.Context, d time.Duration) error {
			t.Errorf("waited %s to retry: the reply is not worth another attempt", d)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// openRouterMidStreamError is OpenRouter's documented error event, sent with status 200
// after some tokens went out: https://openrouter.ai/docs/api-reference/streaming
// (Handling Errors During Streaming).
const openRouterMidStreamError = `data: {"id":"cmpl-abc123","object":"chat.completion.chunk","created":1234567890,"model":"gpt-3.5-turbo","provider":"openai","error":{"code":"server_error","message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`

func TestProviderErrorInReply(t *testing.T) {
	tests := []struct {
		name     string
		stream   bool
		body     string
		wantCode string
		wantMsg  string
	}{
		{
			name:   "OpenRouter error chunk after some text",
			stream: true,
			body: `data: {"id":"cmpl-abc123","object":"chat.completion.chunk","created":1234567890,"model":"gpt-3.5-turbo","provider":"openai","choices":[{"index":0,"delta":{"role":"assistant","content":"Half an ans"},"finish_reason":null}]}

` + openRouterMidStreamError + `

data: [DONE]

`,
			wantCode: "server_error",
			wantMsg:  "Provider disconnected unexpectedly",
		},
		{
			name:     "error event with nothing else, OpenAI style",
			stream:   true,
			body:     "data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n",
			wantCode: "server_error",
			wantMsg:  "The server had an error while processing your request.",
		},
		{
			name:     "error object in a 200 body",
			body:     `{"error":{"code":502,"message":"Your chosen model is down (sk-test-key)"}}`,
			wantCode: "502",
			wantMsg:  "Your chosen model is down ([redacted])",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewTest(t, llmtest.Recording(tt.body))
			_, err := replayClient(t, srv, tt.stream).Complete(context.Background(), userGoal)
			var pe *llm.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *llm.ProviderError", err)
			}
			if pe.Code != tt.wantCode || pe.Message != tt.wantMsg {
				t.Errorf("provider error = %q %q, want %q %q", pe.Code, pe.Message, tt.wantCode, tt.wantMsg)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) || strings.Contains(err.Error(), "sk-test-key") {
				t.Errorf("error %q should carry the provider's message without the key", err)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1: the provider's error is not retried", n)
			}
		})
	}
}

func TestArgumentsAsObject(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		body   string
	}{
		{
			name: "one JSON body",
			body: `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"read_file","arguments":{"path": "a.go", "lines": [1, 20]}}},
				{"id":"call_2","type":"function","function":{"name":"list_files","arguments":"{\"dir\":\".\"}"}}]},"finish_reason":"tool_calls"}]}`,
		},
		{
			name:   "stream",
			stream: true,
			body: `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":{"path": "a.go", "lines": [1, 20]}}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"list_files","arguments":"{\"dir\":"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\".\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
		},
	}
	want := []agent.ToolCall{
		{ID: "call_1", Name: "read_file", Arguments: `{"path":"a.go","lines":[1,20]}`},
		{ID: "call_2", Name: "list_files", Arguments: `{"dir":"."}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewTest(t, llmtest.Recording(tt.body))
			reply, err := replayClient(t, srv, tt.stream).Complete(context.Background(), userGoal)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if !slices.Equal(reply.Message.ToolCalls, want) {
				t.Errorf("calls = %q\nwant %q", reply.Message.ToolCalls, want)
			}
		})
	}
}

// TestStreamLongKeepAlive replays a recorded Azure stream after the keep-alive comments a
// long wait behind OpenRouter brings: 400 comments, 800 lines that are not data.
func TestStreamLongKeepAlive(t *testing.T) {
	body := strings.Repeat(": OPENROUTER PROCESSING\n\n", 400) + loadFixture(t, "azure_stream_text.sse")
	srv := llmtest.NewTest(t, llmtest.Recording(body))
	reply, err := replayClient(t, srv, true).Complete(context.Background(), userGoal)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if reply.Message.Content != "Hello World" {
		t.Errorf("content = %q, want %q", reply.Message.Content, "Hello World")
	}
}
