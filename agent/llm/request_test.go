package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	jsonv1 "github.com/go-json-experiment/json/v1"
	openai "github.com/sashabaranov/go-openai"

	"github.com/loopbot/loopbot/agent"
)

// requestCases are requests of every shape request builds: plain, with tools, with tool
// calls and their results, JSON mode, a token cap either way, and a temperature.
func requestCases() []struct {
	name string
	c    *Client
	req  agent.Request
} {
	zero, warm := float32(0), float32(0.7)
	msgs := []agent.Message{
		{Role: agent.RoleSystem, Content: "You are loopbot. <tag> & \"quotes\" \u2028"},
		{Role: agent.RoleUser, Content: "read a.go"},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"a.go"}`}, {ID: "c2", Name: "look", Arguments: `{}`}}},
		{Role: agent.RoleTool, ToolCallID: "c1", Name: "read_file", Content: "package a\n\tfunc A() {}\n"},
		{Role: agent.RoleTool, ToolCallID: "c2", Name: "look", Content: ""},
		{Role: agent.RoleAssistant, Content: "Done."},
	}
	tools := []agent.ToolSpec{
		{Name: "read_file", Description: "Reads a file.", Parameters: json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string"}}}`)},
		{Name: "look"},
	}
	return []struct {
		name string
		c    *Client
		req  agent.Request
	}{
		{"messages only", &Client{model: "m"}, agent.Request{Messages: msgs[:2]}},
		{"tools and calls", &Client{model: "gpt-4o"}, agent.Request{Messages: msgs, Tools: tools}},
		{"json and max_tokens", &Client{model: "m", temperature: &warm}, agent.Request{Messages: msgs, JSON: true, MaxTokens: 300}},
		{"max_completion_tokens and a zero temperature", &Client{model: "m", completionTokens: true, temperature: &zero}, agent.Request{Messages: msgs, Tools: tools, MaxTokens: 50}},
	}
}

// TestEncodeRequestMatchesGoOpenAI checks that the body the client sends says what
// go-openai's encoding of the same request says, field for field.
func TestEncodeRequestMatchesGoOpenAI(t *testing.T) {
	for _, tt := range requestCases() {
		t.Run(tt.name, func(t *testing.T) {
			creq, err := tt.c.request(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := json.Marshal(creq)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := encodeRequest(creq, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The tools as the client sends them, encoded once for their kept set.
			kept, err := encodeRequest(creq, tt.c.tools.bodyFor(creq.Tools))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(kept, ours) {
				t.Errorf("body with the kept tools differs:\n got %s\nwant %s", kept, ours)
			}
			var want, got any
			if err := json.Unmarshal(theirs, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(ours, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("body differs from go-openai's:\n got %s\nwant %s", ours, theirs)
			}
		})
	}
}

// TestEncodeRequestRefusesWhatItDoesNotCarry checks that a field of go-openai's request
// that the body would not carry is refused, not dropped.
func TestEncodeRequestRefusesWhatItDoesNotCarry(t *testing.T) {
	tests := []struct {
		name string
		set  func(r *openai.ChatCompletionRequest)
	}{
		{"top_p", func(r *openai.ChatCompletionRequest) { r.TopP = 0.5 }},
		{"stop", func(r *openai.ChatCompletionRequest) { r.Stop = []string{"\n"} }},
		{"a message's name", func(r *openai.ChatCompletionRequest) { r.Messages[0].Name = "ann" }},
		{"multi-part content", func(r *openai.ChatCompletionRequest) {
			r.Messages[0].Content, r.Messages[0].MultiContent = "", []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: "hi"}}
		}},
		{"a tool's extra parameters", func(r *openai.ChatCompletionRequest) {
			r.Tools = []openai.Tool{{Type: openai.ToolTypeFunction, Parameters: map[string]any{"cache_control": "x"}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creq := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}
			tt.set(&creq)
			if _, err := encodeRequest(creq, nil); err == nil || !strings.Contains(err.Error(), "does not encode") {
				t.Errorf("encodeRequest: %v, want it refused", err)
			}
		})
	}
}

// BenchmarkRequestBody encodes the body of a step's request: a conversation of 12 messages
// (tool calls and kilobyte results) and 5 tools. "go-openai" is go-openai's encoding, which
// the client used before; "client" is encodeRequest.
func BenchmarkRequestBody(b *testing.B) {
	req := agent.Request{Messages: []agent.Message{{Role: agent.RoleSystem, Content: strings.Repeat("You are loopbot. ", 40)}, {Role: agent.RoleUser, Content: "Find why the build fails."}}}
	for i := range 5 {
		id := "call_" + string(rune('a'+i))
		req.Messages = append(req.Messages,
			agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: id, Name: "read_file", Arguments: `{"path":"internal/pkg/file.go","start":1,"end":200}`}}},
			agent.Message{Role: agent.RoleTool, ToolCallID: id, Content: strings.Repeat("build log line: compiling package ./internal/thing ok\n", 20)})
	}
	for i := range 5 {
		req.Tools = append(req.Tools, agent.ToolSpec{Name: "tool_" + string(rune('a'+i)), Description: "Does one thing to one file.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"start":{"type":"integer"},"end":{"type":"integer"}},"required":["path"]}`)})
	}
	c := &Client{model: "m"}
	creq, err := c.request(req)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("go-openai", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(creq); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("client", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeRequest(creq, c.tools.bodyFor(creq.Tools)); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What a step costs the client before it sends: the translation and the body.
	b.Run("request and body", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			creq, err := c.request(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := encodeRequest(creq, c.tools.bodyFor(creq.Tools)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestAPIError checks that a failed status becomes go-openai's error for it, which classify
// reads: the body's error object with the status, or the body itself when it holds none.
func TestAPIError(t *testing.T) {
	tests := []struct {
		name, body string
		check      func(t *testing.T, err error)
	}{
		{"an error object", `{"error":{"message":"The model does not exist","type":"invalid_request_error","code":"model_not_found"}}`, func(t *testing.T, err error) {
			var ae *openai.APIError
			if !errors.As(err, &ae) || ae.HTTPStatusCode != 404 || ae.Message != "The model does not exist" || ae.Code != "model_not_found" {
				t.Errorf("got %#v, want the API's error with status 404", err)
			}
		}},
		{"no error object", `<html>gateway</html>`, func(t *testing.T, err error) {
			var re *openai.RequestError
			if !errors.As(err, &re) || re.HTTPStatusCode != 404 || string(re.Body) != "<html>gateway</html>" {
				t.Errorf("got %#v, want a request error with the body and status 404", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 404, Status: "404 Not Found", Body: io.NopCloser(strings.NewReader(tt.body))}
			tt.check(t, apiError(resp))
		})
	}
}

// BenchmarkDecodeReply decodes a recorded OpenAI reply with two parallel tool calls into the
// client's wire types: "encoding/json" is how the client decoded it before, "jsonv1" is
// encoding/json's rules on encoding/json/v2's implementation, which the client uses now.
// Besides its speed, the second needs less stack: encoding/json's recursive decoder (and
// the arguments' nested decode) grew every run goroutine that read a reply past 16 KB, a
// third of the makespan scenario's goroutine stacks.
func BenchmarkDecodeReply(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "openai_json_parallel_tools.json"))
	if err != nil {
		b.Fatal(err)
	}
	body := data[bytes.Index(data, []byte("\n{"))+1:]
	for _, dec := range []struct {
		name string
		fn   func([]byte, any) error
	}{{"encoding/json", json.Unmarshal}, {"jsonv1", jsonv1.Unmarshal}} {
		b.Run(dec.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var resp completion
				if err := dec.fn(body, &resp); err != nil || len(resp.Choices[0].Message.ToolCalls) != 2 {
					b.Fatalf("decode: %v, %+v", err, resp)
				}
			}
		})
	}
}
