package llmtest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// startLean starts a Lean server answering with answer and records the shapes it was given.
func startLean(t *testing.T, latency time.Duration, answer llmtest.Answer) (*llmtest.Lean, func() []llmtest.Shape) {
	t.Helper()
	var mu sync.Mutex
	var shapes []llmtest.Shape
	srv := llmtest.NewLean(latency, func(sh llmtest.Shape) llmtest.Answer {
		mu.Lock()
		defer mu.Unlock()
		shapes = append(shapes, sh)
		return answer
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, func() []llmtest.Shape {
		mu.Lock()
		defer mu.Unlock()
		return append([]llmtest.Shape(nil), shapes...)
	}
}

// leanBody is a request of a run two steps in: a tool result each, two tools offered.
const leanBody = `{"model":"gpt-x","messages":[` +
	`{"role":"system","content":"be brief"},` +
	`{"role":"user","content":"look \"twice\""},` +
	`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"look","arguments":"{\"n\":0}"}}]},` +
	`{"role":"tool","tool_call_id":"c1","content":"a result"},` +
	`{"role":"assistant","content":"","tool_calls":[{"id":"c2","type":"function","function":{"name":"look","arguments":"{\"n\":1}"}}]},` +
	`{"role":"tool","tool_call_id":"c2","content":"a result"}],` +
	`"max_tokens":100,"stream":false,` +
	`"tools":[{"type":"function","function":{"name":"look","parameters":{"type":"object"}}},{"type":"function","function":{"name":"other"}}]}`

func TestLeanReadsTheShape(t *testing.T) {
	srv, shapes := startLean(t, 0, llmtest.Answer{Text: "ok"})
	resp := post(t, context.Background(), srv.URL()+"/chat/completions", leanBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := shapes()
	// The contents and tool calls as sent, quotes and escapes included.
	contents := len(`"be brief"`) + len(`"look \"twice\""`) + len(`[{"id":"c1","type":"function","function":{"name":"look","arguments":"{\"n\":0}"}}]`) +
		len(`"a result"`) + len(`""`) + len(`[{"id":"c2","type":"function","function":{"name":"look","arguments":"{\"n\":1}"}}]`) + len(`"a result"`)
	want := llmtest.Shape{Messages: 6, ToolResults: 2, Tools: 2, ContentBytes: contents}
	if len(got) != 1 || got[0] != want {
		t.Errorf("shapes = %+v, want [%+v]", got, want)
	}
}

func TestLeanReplies(t *testing.T) {
	tests := []struct {
		name   string
		answer llmtest.Answer
		check  func(t *testing.T, c completion)
	}{
		{"text", llmtest.Answer{Text: "done \"quoted\" ü"}, func(t *testing.T, c completion) {
			msg := c.Choices[0].Message
			if msg.Content == nil || *msg.Content != "done \"quoted\" ü" || len(msg.ToolCalls) != 0 {
				t.Errorf("message = %+v", msg)
			}
			if f := c.Choices[0].FinishReason; f == nil || *f != "stop" {
				t.Errorf("finish reason = %v, want stop", f)
			}
		}},
		{"tool call", llmtest.Answer{Tool: "look", Arguments: `{"n":2}`}, func(t *testing.T, c completion) {
			msg := c.Choices[0].Message
			if msg.Content != nil {
				t.Errorf("content = %q next to a tool call, want null", *msg.Content)
			}
			if len(msg.ToolCalls) != 1 {
				t.Fatalf("tool calls = %+v", msg.ToolCalls)
			}
			if got := msg.ToolCalls[0]; !strings.HasPrefix(got.ID, "call_") || got.Type != "function" || got.Function.Name != "look" || got.Function.Arguments != `{"n":2}` {
				t.Errorf("call = %+v", got)
			}
			if f := c.Choices[0].FinishReason; f == nil || *f != "tool_calls" {
				t.Errorf("finish reason = %v, want tool_calls", f)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := startLean(t, 0, tt.answer)
			resp := post(t, context.Background(), srv.URL()+"/chat/completions", chatBody)
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			c := decode(t, resp)
			if c.Object != "chat.completion" || c.Model != "m" || len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" {
				t.Fatalf("reply = %+v", c)
			}
			tt.check(t, c)
			// `"be brief"` and `"list the files please"` are 33 bytes as sent.
			completionChars := len(tt.answer.Text) + len(tt.answer.Arguments)
			if u := c.Usage; u == nil || u.PromptTokens != 33/4 || u.CompletionTokens != completionChars/4 || u.TotalTokens != 33/4+completionChars/4 {
				t.Errorf("usage = %+v", u)
			}
		})
	}
}

// TestLeanRepliesAsServerDoes compares Lean's replies with Server's for the same answers:
// the same JSON but for the generated IDs, the time and the usage, which each estimates its
// own way.
func TestLeanRepliesAsServerDoes(t *testing.T) {
	answers := []llmtest.Answer{{Text: "two files"}, {Tool: "look", Arguments: `{"n":1}`}, {Text: "bad \xff utf-8"}}
	for i, a := range answers {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			step := llmtest.Text(a.Text)
			if a.Tool != "" {
				step = llmtest.ToolCalls(llmtest.Call(a.Tool, a.Arguments))
			}
			full := llmtest.NewTest(t, step)
			lean, _ := startLean(t, 0, a)
			var got [2]map[string]any
			for j, url := range []string{full.URL(), lean.URL()} {
				resp := post(t, context.Background(), url+"/chat/completions", chatBody)
				if err := json.NewDecoder(resp.Body).Decode(&got[j]); err != nil {
					t.Fatal(err)
				}
				delete(got[j], "id")
				delete(got[j], "created")
				delete(got[j], "usage")
				for _, c := range got[j]["choices"].([]any) {
					calls, _ := c.(map[string]any)["message"].(map[string]any)["tool_calls"].([]any)
					for _, tc := range calls {
						delete(tc.(map[string]any), "id")
					}
				}
			}
			a, _ := json.Marshal(got[0])
			b, _ := json.Marshal(got[1])
			if string(a) != string(b) {
				t.Errorf("Server replied\n%s\nLean replied\n%s", a, b)
			}
		})
	}
}

func TestLeanRefuses(t *testing.T) {
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		want   int
	}{
		{"GET", http.MethodGet, "/v1/chat/completions", "", http.StatusMethodNotAllowed},
		{"other path", http.MethodPost, "/v1/embeddings", chatBody, http.StatusNotFound},
		{"broken body", http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[`, http.StatusBadRequest},
		{"not an object", http.MethodPost, "/v1/chat/completions", `["model"]`, http.StatusBadRequest},
		{"a second value", http.MethodPost, "/v1/chat/completions", chatBody + `{}`, http.StatusBadRequest},
		{"messages not an array", http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":{}}`, http.StatusBadRequest},
		{"a message not an object", http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":["hi"]}`, http.StatusBadRequest},
		{"a role not a string", http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[{"role":1}]}`, http.StatusBadRequest},
		{"tools not an array", http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[],"tools":{}}`, http.StatusBadRequest},
		{"no model", http.MethodPost, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadRequest},
		{"model not a string", http.MethodPost, "/v1/chat/completions", `{"model":1,"messages":[]}`, http.StatusBadRequest},
		{"stream not a boolean", http.MethodPost, "/v1/chat/completions", `{"model":"m","stream":"yes","messages":[]}`, http.StatusBadRequest},
		{"a name twice", http.MethodPost, "/v1/chat/completions", `{"model":"m","model":"n","messages":[]}`, http.StatusBadRequest},
		{"invalid UTF-8", http.MethodPost, "/v1/chat/completions", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", http.StatusBadRequest},
		{"a stream", http.MethodPost, "/v1/chat/completions", streamBody, http.StatusBadRequest},
	}
	answered := 0
	srv := llmtest.NewLean(0, func(llmtest.Shape) llmtest.Answer { answered++; return llmtest.Answer{Text: "no"} })
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	base := strings.TrimSuffix(srv.URL(), "/v1")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := send(t, tt.method, base+tt.path, tt.body)
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.want)
			}
			var e struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Message == "" {
				t.Errorf("error body: %v, %+v", err, e)
			}
		})
	}
	n := int64(len(tests))
	if got, want := srv.Stats(), (llmtest.LeanStats{Requests: n, Refused: n}); got != want || answered != 0 {
		t.Errorf("stats %+v and %d answered, want %+v and none", got, answered, want)
	}
}

func TestLeanStats(t *testing.T) {
	srv := llmtest.NewLean(0, func(sh llmtest.Shape) llmtest.Answer {
		if sh.ToolResults < 2 {
			return llmtest.Answer{Tool: "look", Arguments: "{}"}
		}
		return llmtest.Answer{Text: "done"}
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	post(t, context.Background(), srv.URL()+"/chat/completions", chatBody) // a call
	post(t, context.Background(), srv.URL()+"/chat/completions", leanBody) // the answer
	post(t, context.Background(), srv.URL()+"/embeddings", chatBody)       // refused
	if got, want := srv.Stats(), (llmtest.LeanStats{Requests: 3, ToolCalls: 1, Texts: 1, Refused: 1}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

func TestLeanWaitsItsLatency(t *testing.T) {
	arrived := make(chan struct{})
	srv := llmtest.NewLean(time.Hour, func(llmtest.Shape) llmtest.Answer {
		close(arrived)
		return llmtest.Answer{Text: "late"}
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Post(srv.URL()+"/chat/completions", "application/json", strings.NewReader(chatBody))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived // the handler has read the request and now waits an hour
	select {
	case err := <-errc:
		t.Fatalf("answered before its latency: %v", err)
	default:
	}
	srv.Close()
	if err := <-errc; err == nil {
		t.Error("a request cut by Close got a whole reply")
	}
	if got := srv.Stats(); got.Texts != 0 {
		t.Errorf("stats %+v: an unanswered request was counted as answered", got)
	}
}
