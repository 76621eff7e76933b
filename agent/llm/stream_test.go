package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/loopbot/loopbot/agent"
)

// accumulate feeds the data lines of a captured stream to an accumulator.
func accumulate(t *testing.T, lines []string) *accumulator {
	t.Helper()
	var acc accumulator
	for i, l := range lines {
		var ck chunk
		if err := json.Unmarshal([]byte(l), &ck); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		acc.add(ck)
	}
	return &acc
}

func TestAccumulator(t *testing.T) {
	tests := []struct {
		name       string
		chunks     []string
		wantText   string
		wantCalls  []agent.ToolCall
		wantFinish string
		wantPrompt int
	}{
		{
			name: "OpenAI text with usage chunk",
			chunks: []string{
				`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
				`{"id":"c","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null}`,
				`{"id":"c","choices":[{"index":0,"delta":{"content":"lo, wörld"},"finish_reason":null}],"usage":null}`,
				`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
				`{"id":"c","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":3,"total_tokens":22,"prompt_tokens_details":{"cached_tokens":0}}}`,
			},
			wantText:   "Hello, wörld",
			wantFinish: "stop",
			wantPrompt: 19,
		},
		{
			name: "OpenAI parallel calls, one after the other",
			chunks: []string{
				`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_Xa","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"lo"}}]},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"cation\": \"Paris\"}"}}]},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_Yb","type":"function","function":{"name":"get_time","arguments":""}}]},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"tz\": \"CET\"}"}}]},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			},
			wantCalls: []agent.ToolCall{
				{ID: "call_Xa", Name: "get_weather", Arguments: `{"location": "Paris"}`},
				{ID: "call_Yb", Name: "get_time", Arguments: `{"tz": "CET"}`},
			},
			wantFinish: "tool_calls",
		},
		{
			name: "Ollama parallel calls, each whole at index 0",
			chunks: []string{
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_a1","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}`,
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_b2","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},"finish_reason":null}]}`,
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}`,
			},
			wantCalls: []agent.ToolCall{
				{ID: "call_a1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "call_b2", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
			},
			wantFinish: "tool_calls",
		},
		{
			name: "a new ID at an occupied index, then continued there",
			chunks: []string{
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"a","arguments":"{"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"y","function":{"name":"b","arguments":"["}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"y","function":{"arguments":"]"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			},
			wantCalls: []agent.ToolCall{
				{ID: "x", Name: "a", Arguments: `{}`},
				{ID: "y", Name: "b", Arguments: `[]`},
			},
			wantFinish: "tool_calls",
		},
		{
			name: "interleaved deltas, indexes out of order",
			chunks: []string{
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"grep","arguments":""}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"read","arguments":"{\"p"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"q\":"}},{"index":0,"function":{"arguments":"\":1"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"x\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			},
			wantCalls: []agent.ToolCall{
				{ID: "a", Name: "read", Arguments: `{"p":1}`},
				{ID: "b", Name: "grep", Arguments: `{"q":"x"}`},
			},
			wantFinish: "tool_calls",
		},
		{
			name: "no index, whole calls in one delta each",
			chunks: []string{
				`{"choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_2","type":"function","function":{"name":"cat","arguments":"{\"f\":\"a\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":7,"completion_tokens":2}}`,
			},
			wantCalls: []agent.ToolCall{
				{ID: "call_1", Name: "ls", Arguments: `{}`},
				{ID: "call_2", Name: "cat", Arguments: `{"f":"a"}`},
			},
			wantFinish: "tool_calls",
			wantPrompt: 7,
		},
		{
			name: "no index, ID and name repeated in every delta",
			chunks: []string{
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"t1","type":"function","function":{"name":"ls","arguments":"{\"d\""}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"t1","type":"function","function":{"name":"ls","arguments":":\"/\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":""}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			},
			wantCalls:  []agent.ToolCall{{ID: "t1", Name: "ls", Arguments: `{"d":"/"}`}},
			wantFinish: "tool_calls",
		},
		{
			name: "malformed arguments kept as sent",
			chunks: []string{
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"m","type":"function","function":{"name":"ls","arguments":"{\"d\": "}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"oops"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			},
			wantCalls:  []agent.ToolCall{{ID: "m", Name: "ls", Arguments: `{"d": oops`}},
			wantFinish: "tool_calls",
		},
		{
			name: "other choices are ignored",
			chunks: []string{
				`{"choices":[{"index":1,"delta":{"content":"second choice"}},{"index":0,"delta":{"content":"first"}}]}`,
				`{"choices":[{"index":1,"delta":{},"finish_reason":"length"},{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			},
			wantText:   "first",
			wantFinish: "stop",
		},
		{
			name: "refusal",
			chunks: []string{
				`{"choices":[{"index":0,"delta":{"role":"assistant","refusal":"I can't "}}]}`,
				`{"choices":[{"index":0,"delta":{"refusal":"help with that."}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			},
			wantText:   "I can't help with that.",
			wantFinish: "stop",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acc := accumulate(t, tt.chunks)
			reply, err := acc.reply()
			if err != nil {
				t.Fatalf("reply: %v", err)
			}
			if reply.Message.Content != tt.wantText {
				t.Errorf("content = %q, want %q", reply.Message.Content, tt.wantText)
			}
			if !slices.Equal(reply.Message.ToolCalls, tt.wantCalls) {
				t.Errorf("calls = %q\nwant %q", reply.Message.ToolCalls, tt.wantCalls)
			}
			if reply.FinishReason != tt.wantFinish {
				t.Errorf("finish = %q, want %q", reply.FinishReason, tt.wantFinish)
			}
			prompt := 0
			if acc.usage != nil {
				prompt = acc.usage.PromptTokens
			}
			if prompt != tt.wantPrompt {
				t.Errorf("prompt tokens = %d, want %d", prompt, tt.wantPrompt)
			}
		})
	}
}

func TestAccumulatorIncomplete(t *testing.T) {
	acc := accumulate(t, []string{
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"ls","arguments":"{\"d"}}]}}]}`,
	})
	if _, err := acc.reply(); !errors.Is(err, errIncompleteStream) {
		t.Errorf("reply of a stream without a finish reason: err = %v, want errIncompleteStream", err)
	}
}

// FuzzAccumulator feeds arbitrary chunk sequences, one JSON chunk per line, and checks that
// nothing of the first choice is lost or invented: the text is the concatenation of the
// content deltas, and every argument byte lands in exactly one call.
func FuzzAccumulator(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x","arguments":"{"}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"y","arguments":"["}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}
{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"content":"hi"}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","function":{"arguments":"1"}},{"function":{"arguments":"2"}},{"id":"b","function":{"arguments":"3"}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":9223372036854775807,"function":{"arguments":"4"}},{"id":"c","function":{"arguments":"5"}}]}}]}
{"choices":[],"usage":{"prompt_tokens":1}}
{"choices":[{"index":0,"finish_reason":"stop"}]}`))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":-3,"id":"n"}]}}]}`))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x","arguments":"{}"}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"x","arguments":"{}"}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","function":{"arguments":"1"}},{"index":0,"function":{"arguments":"2"}}]}}]}
{"choices":[{"index":0,"finish_reason":"tool_calls"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var (
			acc       accumulator
			wantText  strings.Builder
			wantArgs  int
			deltas    int
			ids       = map[string]bool{}
			finishing bool
			failing   bool
		)
		for line := range bytes.Lines(data) {
			var ck chunk
			if json.Unmarshal(line, &ck) != nil {
				continue
			}
			if ck.Error != nil {
				failing = true
			}
			for _, ch := range ck.Choices {
				if ch.Index != 0 {
					continue
				}
				wantText.WriteString(ch.Delta.Content)
				for _, d := range ch.Delta.ToolCalls {
					wantArgs += len(d.Function.Arguments)
					deltas++
					if d.ID != "" {
						ids[d.ID] = true
					}
				}
				if ch.FinishReason != "" && ch.FinishReason != string(openai.FinishReasonNull) {
					finishing = true
				}
			}
			acc.add(ck)
		}
		reply, err := acc.reply()
		if failing {
			var pe *ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("a chunk reported an error, err = %v", err)
			}
			return
		}
		if !finishing {
			if !errors.Is(err, errIncompleteStream) {
				t.Fatalf("no finish reason, err = %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("reply: %v", err)
		}
		if wantText.Len() > 0 && reply.Message.Content != wantText.String() {
			t.Errorf("content = %q, want %q", reply.Message.Content, wantText.String())
		}
		gotArgs := 0
		for _, c := range reply.Message.ToolCalls {
			gotArgs += len(c.Arguments)
		}
		if gotArgs != wantArgs {
			t.Errorf("argument bytes = %d, want %d", gotArgs, wantArgs)
		}
		if len(reply.Message.ToolCalls) > deltas {
			t.Errorf("%d calls from %d deltas", len(reply.Message.ToolCalls), deltas)
		}
		// Calls are never merged across distinct IDs: every ID a delta carried names a call.
		for _, c := range reply.Message.ToolCalls {
			delete(ids, c.ID)
		}
		if len(ids) > 0 {
			t.Errorf("IDs %v were merged into other calls: %q", slices.Sorted(maps.Keys(ids)), reply.Message.ToolCalls)
		}
	})
}

// sseTransport answers every request with the same server-sent events body, without a
// network.
type sseTransport []byte

func (b sseTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(b)),
		Request:    req,
	}, nil
}

// FuzzStream feeds arbitrary bodies to a streaming Complete, through go-openai's event
// framing and this package's chunk decoding and assembly: it must not panic, and a reply it
// accepts holds a call for every ID the stream's tool-call deltas carried, so no two calls
// with distinct IDs were merged.
func FuzzStream(f *testing.F) {
	for _, name := range []string{"ollama_stream_parallel_index0.sse", "openai_stream_tool_call.sse", "vllm_stream_tool_call.sse", "openrouter_stream_reasoning_error.sse", "openrouter_stream_reasoning.sse", "azure_stream_text.sse"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"arguments\":{\"x\":1}}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"b\",\"function\":{\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := New(Config{BaseURL: "http://fuzz.invalid/v1", Model: "m", Stream: true, MaxRetries: -1},
			WithHTTPClient(&http.Client{Transport: sseTransport(body)}))
		if err != nil {
			t.Fatal(err)
		}
		reply, err := c.Complete(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
		if err != nil {
			return
		}
		// The IDs of the deltas the client read: the data lines up to [DONE], as go-openai
		// frames them.
		ids := map[string]bool{}
		for line := range bytes.Lines(body) {
			line = bytes.TrimSpace(line)
			data, ok := bytes.CutPrefix(line, []byte("data:"))
			if !ok {
				continue
			}
			data = bytes.TrimLeft(data, " \t")
			if string(data) == "[DONE]" {
				break
			}
			var ck chunk
			if json.Unmarshal(data, &ck) != nil {
				continue
			}
			for _, ch := range ck.Choices {
				if ch.Index != 0 {
					continue
				}
				for _, d := range ch.Delta.ToolCalls {
					if d.ID != "" {
						ids[d.ID] = true
					}
				}
			}
		}
		for _, call := range reply.Message.ToolCalls {
			delete(ids, call.ID)
		}
		if len(ids) > 0 {
			t.Errorf("IDs %v were merged into other calls: %q", slices.Sorted(maps.Keys(ids)), reply.Message.ToolCalls)
		}
	})
}
