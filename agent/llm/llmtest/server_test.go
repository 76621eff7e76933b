package llmtest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// post sends a chat completions request body to srv and returns the response.
func post(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// send sends a request with body and returns the response.
func send(t *testing.T, method, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const chatBody = `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"list the files please"}]}`
const streamBody = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"list the files please"}]}`

type completion struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []call  `json:"tool_calls"`
		} `json:"message"`
		Delta struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []call `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

type call struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func decode(t *testing.T, resp *http.Response) completion {
	t.Helper()
	var c completion
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatalf("decode reply: %v", err)
	}
	return c
}

// events reads a server-sent event stream: the data of each event, and whether it ended with
// data: [DONE].
func events(t *testing.T, resp *http.Response) (chunks []completion, done bool, readErr error) {
	t.Helper()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		if done {
			t.Fatalf("data after [DONE]: %s", data)
		}
		var c completion
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		chunks = append(chunks, c)
	}
	return chunks, done, sc.Err()
}

func TestReplyJSON(t *testing.T) {
	srv := llmtest.NewTest(t,
		llmtest.Text("two files"),
		llmtest.ToolCalls(llmtest.Call("ls", `{"dir":"."}`), llmtest.ToolCall{ID: "mine", Name: "cat", Arguments: `not json`}),
	)
	c := decode(t, post(t, context.Background(), srv.URL()+"/chat/completions", chatBody))
	if c.Object != "chat.completion" || c.Model != "m" || len(c.Choices) != 1 {
		t.Fatalf("reply = %+v", c)
	}
	msg := c.Choices[0].Message
	if msg.Role != "assistant" || msg.Content == nil || *msg.Content != "two files" || len(msg.ToolCalls) != 0 {
		t.Errorf("message = %+v", msg)
	}
	if f := c.Choices[0].FinishReason; f == nil || *f != "stop" {
		t.Errorf("finish reason = %v, want stop", f)
	}
	// "be brief" + "list the files please" is 29 characters; "two files" is 9.
	if u := c.Usage; u == nil || u.PromptTokens != 29/4 || u.CompletionTokens != 9/4 || u.TotalTokens != 29/4+9/4 {
		t.Errorf("usage = %+v, want characters/4", u)
	}

	c = decode(t, post(t, context.Background(), strings.TrimSuffix(srv.URL(), "/v1")+"/chat/completions", chatBody))
	msg = c.Choices[0].Message
	if msg.Content != nil {
		t.Errorf("content = %q next to tool calls, want null", *msg.Content)
	}
	if len(msg.ToolCalls) != 2 {
		t.Fatalf("tool calls = %+v", msg.ToolCalls)
	}
	if got := msg.ToolCalls[0]; !strings.HasPrefix(got.ID, "call_") || got.Type != "function" || got.Function.Name != "ls" || got.Function.Arguments != `{"dir":"."}` {
		t.Errorf("first call = %+v, want a generated ID", got)
	}
	if got := msg.ToolCalls[1]; got.ID != "mine" || got.Function.Arguments != "not json" {
		t.Errorf("second call = %+v, want its own ID and raw arguments", got)
	}
	if f := c.Choices[0].FinishReason; f == nil || *f != "tool_calls" {
		t.Errorf("finish reason = %v, want tool_calls", f)
	}
}

func TestReplyStream(t *testing.T) {
	calls := []llmtest.ToolCall{
		{ID: "a", Name: "read", Arguments: `{"path":"some/long/path.go"}`},
		{ID: "b", Name: "grep", Arguments: `{"q":"ünïcödé \"quoted\""}`},
	}
	tests := []struct {
		name      string
		body      string
		wantUsage bool
	}{
		{"with usage", streamBody, true},
		{"without usage", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewTest(t, llmtest.Reply("Looking.", calls...).WithUsage(llmtest.Usage{PromptTokens: 10, CompletionTokens: 4, CachedTokens: 6}))
			resp := post(t, context.Background(), srv.URL()+"/chat/completions", tt.body)
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("content type = %q", ct)
			}
			chunks, done, err := events(t, resp)
			if err != nil || !done {
				t.Fatalf("stream ended with err %v, [DONE] %t", err, done)
			}
			var (
				text     strings.Builder
				args     = map[int]*strings.Builder{}
				ids      = map[int]string{}
				order    []int
				finish   string
				usageSet bool
			)
			for i, c := range chunks {
				if c.Object != "chat.completion.chunk" {
					t.Errorf("chunk %d object = %q", i, c.Object)
				}
				if c.Usage != nil {
					usageSet = true
					if len(c.Choices) != 0 || c.Usage.PromptTokens != 10 || c.Usage.CompletionTokens != 4 || c.Usage.PromptTokensDetails.CachedTokens != 6 {
						t.Errorf("usage chunk = %+v", c)
					}
					continue
				}
				d := c.Choices[0].Delta
				text.WriteString(d.Content)
				for _, tc := range d.ToolCalls {
					if tc.Index == nil {
						t.Fatalf("chunk %d: tool call delta without index", i)
					}
					k := *tc.Index
					if args[k] == nil {
						if tc.ID == "" || tc.Function.Name == "" {
							t.Errorf("first delta of call %d = %+v, want its ID and name", k, tc)
						}
						args[k], ids[k] = &strings.Builder{}, tc.ID
					} else if tc.ID != "" || tc.Function.Name != "" {
						t.Errorf("later delta of call %d repeats ID or name: %+v", k, tc)
					}
					args[k].WriteString(tc.Function.Arguments)
					order = append(order, k)
				}
				if f := c.Choices[0].FinishReason; f != nil {
					finish = *f
				}
			}
			if text.String() != "Looking." {
				t.Errorf("text = %q", text.String())
			}
			for k, c := range calls {
				if ids[k] != c.ID || args[k] == nil || args[k].String() != c.Arguments {
					t.Errorf("call %d reassembled as %q %v, want %q %q", k, ids[k], args[k], c.ID, c.Arguments)
				}
			}
			if !interleaved(order) {
				t.Errorf("deltas of the calls came in order %v; want them interleaved", order)
			}
			if finish != "tool_calls" {
				t.Errorf("finish reason = %q", finish)
			}
			if usageSet != tt.wantUsage {
				t.Errorf("usage chunk sent = %t, want %t", usageSet, tt.wantUsage)
			}
		})
	}
}

// interleaved reports whether a call's deltas come again after another call's began.
func interleaved(order []int) bool {
	seen := map[int]bool{}
	for i, k := range order {
		if seen[k] && order[i-1] != k {
			return true
		}
		seen[k] = true
	}
	return false
}

func TestTruncate(t *testing.T) {
	t.Run("stream", func(t *testing.T) {
		srv := llmtest.NewTest(t, llmtest.Truncate(llmtest.Text("a reply long enough to be cut in several chunks")))
		chunks, done, err := events(t, post(t, context.Background(), srv.URL()+"/chat/completions", streamBody))
		if done {
			t.Error("a truncated stream sent [DONE]")
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("read error = %v, want unexpected EOF", err)
		}
		for _, c := range chunks {
			if len(c.Choices) > 0 && c.Choices[0].FinishReason != nil {
				t.Errorf("a truncated stream sent a finish reason")
			}
		}
		if len(chunks) == 0 {
			t.Error("a truncated stream sent nothing")
		}
	})
	t.Run("json", func(t *testing.T) {
		srv := llmtest.NewTest(t, llmtest.Truncate(llmtest.Text("cut")))
		resp := post(t, context.Background(), srv.URL()+"/chat/completions", chatBody)
		b, err := io.ReadAll(resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("read error = %v, want unexpected EOF", err)
		}
		if json.Valid(b) || len(b) == 0 {
			t.Errorf("body %q, want the first half of a JSON reply", b)
		}
	})
}

func TestErrorSteps(t *testing.T) {
	date := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Format(http.TimeFormat)
	tests := []struct {
		name        string
		step        llmtest.Step
		wantStatus  int
		wantRetry   string
		wantType    string
		wantMessage string
	}{
		{"429 rounds Retry-After up", llmtest.Status(http.StatusTooManyRequests, 1500*time.Millisecond), 429, "2", "rate_limit_error", "scripted 429"},
		{"500 without Retry-After", llmtest.Status(http.StatusInternalServerError, 0), 500, "", "server_error", "scripted 500"},
		{"date header", llmtest.Status(http.StatusServiceUnavailable, 0).WithHeader("Retry-After", date), 503, date, "server_error", "scripted 503"},
		{"error message", llmtest.Error(http.StatusBadRequest, "bad schema"), 400, "", "invalid_request_error", "bad schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewTest(t, tt.step)
			resp := post(t, context.Background(), srv.URL()+"/chat/completions", chatBody)
			if resp.StatusCode != tt.wantStatus || resp.Header.Get("Retry-After") != tt.wantRetry {
				t.Errorf("status %d, Retry-After %q; want %d, %q", resp.StatusCode, resp.Header.Get("Retry-After"), tt.wantStatus, tt.wantRetry)
			}
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if e.Error.Type != tt.wantType || !strings.Contains(e.Error.Message, tt.wantMessage) {
				t.Errorf("error = %+v, want type %q and message with %q", e.Error, tt.wantType, tt.wantMessage)
			}
		})
	}
}

func TestScriptOrderAndFallback(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.Text("one"))
	srv.Push(llmtest.Text("two"))
	if n := srv.Remaining(); n != 2 {
		t.Fatalf("Remaining = %d, want 2", n)
	}
	for _, want := range []string{"one", "two"} {
		c := decode(t, post(t, context.Background(), srv.URL()+"/chat/completions", chatBody))
		if got := *c.Choices[0].Message.Content; got != want {
			t.Errorf("reply %q, want %q", got, want)
		}
	}
	resp := post(t, context.Background(), srv.URL()+"/chat/completions", chatBody)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), "script is exhausted") {
		t.Errorf("after the script: %d %s; want 500 saying the script is exhausted", resp.StatusCode, b)
	}
	srv.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		return llmtest.Text("echo " + r.LastMessage().Content)
	}))
	for range 3 {
		c := decode(t, post(t, context.Background(), srv.URL()+"/chat/completions", chatBody))
		if got := *c.Choices[0].Message.Content; got != "echo list the files please" {
			t.Errorf("fallback reply %q", got)
		}
	}
	if n := len(srv.Requests()); n != 6 {
		t.Errorf("recorded %d requests, want 6", n)
	}
}

func TestRecordsRequests(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.Text("ok"))
	body := `{
		"model": "gpt-x", "stream": false, "max_tokens": 64, "temperature": 0.5,
		"response_format": {"type": "json_object"},
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "here"}]},
			{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"d\":1}"}}]},
			{"role": "tool", "tool_call_id": "c1", "name": "ls", "content": "a b"}
		],
		"tools": [{"type": "function", "function": {"name": "ls", "description": "List.", "parameters": {"type": "object"}}}]
	}`
	post(t, context.Background(), srv.URL()+"/chat/completions?api-version=1", body)
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" || r.Query != "api-version=1" || r.Model != "gpt-x" || r.MaxTokens != 64 || r.ResponseFormat != "json_object" || r.Stream {
		t.Errorf("request = %+v", r)
	}
	if r.Temperature == nil || *r.Temperature != 0.5 {
		t.Errorf("temperature = %v", r.Temperature)
	}
	if len(r.Messages) != 3 {
		t.Fatalf("messages = %+v", r.Messages)
	}
	if m := r.Messages[0]; m.Role != "user" || m.Content != "look\nhere" {
		t.Errorf("multi-part message = %+v, want its texts joined", m)
	}
	if m := r.Messages[1]; m.Role != "assistant" || m.Content != "" || len(m.ToolCalls) != 1 || m.ToolCalls[0] != (llmtest.ToolCall{ID: "c1", Name: "ls", Arguments: `{"d":1}`}) {
		t.Errorf("assistant message = %+v", m)
	}
	if m := r.Messages[2]; m.Role != "tool" || m.ToolCallID != "c1" || m.Name != "ls" || m.Content != "a b" {
		t.Errorf("tool message = %+v", m)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "ls" || r.Tools[0].Description != "List." || string(r.Tools[0].Parameters) != `{"type": "object"}` {
		t.Errorf("tools = %+v", r.Tools)
	}
	if got := r.Chars(); got != len("look\nhere")+len(`{"d":1}`)+len("a b") {
		t.Errorf("Chars = %d", got)
	}
	if !bytes.Contains(r.Body, []byte(`"gpt-x"`)) {
		t.Errorf("raw body not recorded")
	}
}

func TestRejectsOtherRequests(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.Text("kept for a valid request"))
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		want   int
	}{
		{"GET", http.MethodGet, "/v1/chat/completions", "", http.StatusMethodNotAllowed},
		{"other path", http.MethodPost, "/v1/embeddings", chatBody, http.StatusNotFound},
		{"broken body", http.MethodPost, "/v1/chat/completions", `{"messages":[`, http.StatusBadRequest},
		{"content of the wrong type", http.MethodPost, "/v1/chat/completions", `{"messages":[{"role":"user","content":42}]}`, http.StatusBadRequest},
	}
	base := strings.TrimSuffix(srv.URL(), "/v1")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := send(t, tt.method, base+tt.path, tt.body)
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
	if n, r := len(srv.Requests()), srv.Remaining(); n != 0 || r != 1 {
		t.Errorf("recorded %d requests and %d steps remain; rejected requests must neither be recorded nor consume the script", n, r)
	}
}

func TestHangReleasedByClose(t *testing.T) {
	arrived := make(chan struct{})
	srv := llmtest.New(llmtest.Func(func(llmtest.Request) llmtest.Step {
		close(arrived)
		return llmtest.Hang()
	}))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(chatBody))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	srv.Close()
	if err := <-errc; err == nil {
		t.Error("a hanging request ended without error when the server closed")
	}
}

func TestDelay(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.Delay(time.Millisecond, llmtest.Text("late")), llmtest.Delay(time.Hour, llmtest.Text("never")))
	c := decode(t, post(t, context.Background(), srv.URL()+"/chat/completions", chatBody))
	if got := *c.Choices[0].Message.Content; got != "late" {
		t.Errorf("reply %q, want late", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(chatBody))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("an hour's delay answered %d before the client's deadline", resp.StatusCode)
	}
}

func TestStartTwice(t *testing.T) {
	srv := llmtest.NewTest(t)
	if err := srv.Start(); err == nil {
		t.Error("a second Start succeeded")
	}
}

func TestFuncKeepsModifiers(t *testing.T) {
	srv := llmtest.NewTest(t, llmtest.Func(func(r llmtest.Request) llmtest.Step {
		return llmtest.Text("from func")
	}).WithHeader("X-Scripted", "yes").WithUsage(llmtest.Usage{PromptTokens: 42}))
	resp := post(t, context.Background(), srv.URL()+"/chat/completions", chatBody)
	if resp.Header.Get("X-Scripted") != "yes" {
		t.Errorf("header of the Func step lost")
	}
	if c := decode(t, resp); *c.Choices[0].Message.Content != "from func" || c.Usage.PromptTokens != 42 {
		t.Errorf("reply = %+v, want the Func's text with the Func step's usage", c)
	}
}

func TestRecording(t *testing.T) {
	sse := ": OPENROUTER PROCESSING\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	doc := `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	tests := []struct {
		name, body, request, contentType string
	}{
		{"events", sse, streamBody, "text/event-stream"},
		{"document", doc, chatBody, "application/json"},
		{"events whatever was asked", sse, chatBody, "text/event-stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewTest(t, llmtest.Recording(tt.body))
			resp := post(t, context.Background(), srv.URL()+"/chat/completions", tt.request)
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || string(got) != tt.body {
				t.Errorf("answer %d %q, want 200 and the recording byte for byte", resp.StatusCode, got)
			}
			if ct := resp.Header.Get("Content-Type"); ct != tt.contentType {
				t.Errorf("content type %q, want %q", ct, tt.contentType)
			}
		})
	}
}
