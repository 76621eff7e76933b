package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// providerFixture is a recorded reply of a real provider in testdata, with what the client
// must make of it. Each file's header says where the recording comes from.
type providerFixture struct {
	file   string
	stream bool

	text       string
	calls      []agent.ToolCall
	finish     string
	prompt     int
	completion int
	// providerErr is the message of the error the provider reported in the reply.
	providerErr string
}

var providerFixtures = []providerFixture{
	{
		file: "openai_stream_tool_call.sse", stream: true,
		calls:  []agent.ToolCall{{ID: "call_CTf1nWJLqSeRgDqaCG27xZ74", Name: "get_weather", Arguments: `{"city":"San Francisco","state":"CA"}`}},
		finish: "tool_calls", prompt: 48, completion: 19,
	},
	{
		file: "openai_json_parallel_tools.json",
		calls: []agent.ToolCall{
			{ID: "call_fdNz3vOBKYgOIpMdWotB9MjY", Name: "GetWeatherArgs", Arguments: `{"city": "Edinburgh", "country": "GB", "units": "c"}`},
			{ID: "call_h1DWI1POMJLb0KwIyQHWXD4p", Name: "get_stock_price", Arguments: `{"ticker": "AAPL", "exchange": "NASDAQ"}`},
		},
		finish: "tool_calls", prompt: 149, completion: 60,
	},
	{
		file: "azure_stream_text.sse", stream: true,
		text: "Hello World", finish: "stop", prompt: 15, completion: 5,
	},
	{
		file: "azure_json_parallel_tools.json",
		calls: []agent.ToolCall{
			{ID: "call_Ogl4xrgYelrGfioRoTJoXCF0", Name: "secret_retrieval_tool", Arguments: `{"password": "mellon"}`},
			{ID: "call_J8hE6f1cZ8sJIzw3FCswowSI", Name: "secret_retrieval_tool", Arguments: `{"password": "radiance"}`},
		},
		finish: "tool_calls", prompt: 75, completion: 54,
	},
	{
		file: "openrouter_stream_reasoning_error.sse", stream: true,
		providerErr: "Token limit reached",
	},
	{
		file: "openrouter_stream_reasoning.sse", stream: true,
		text: "2 + 2 = 4", finish: "stop", prompt: 43, completion: 36,
	},
	{
		file:   "openrouter_json_tool_call.json",
		calls:  []agent.ToolCall{{ID: "3sniiMddS", Name: "divide", Arguments: `{"numerator": 123, "denominator": 456, "on_inf": "infinity"}`}},
		finish: "tool_calls", prompt: 134, completion: 43,
	},
	{
		file: "ollama_stream_parallel.sse", stream: true,
		calls: []agent.ToolCall{
			{ID: "call_wteop8bt", Name: "run_command", Arguments: `{"command":"ls"}`},
			{ID: "call_rk2xye1l", Name: "run_command", Arguments: `{"command":"ls -l"}`},
		},
		finish: "tool_calls",
	},
	{
		file: "ollama_stream_parallel_index0.sse", stream: true,
		calls: []agent.ToolCall{
			{ID: "call_wteop8bt", Name: "run_command", Arguments: `{"command":"ls"}`},
			{ID: "call_rk2xye1l", Name: "run_command", Arguments: `{"command":"ls -l"}`},
		},
		finish: "tool_calls",
	},
	{
		file:   "ollama_json_tool_call.json",
		calls:  []agent.ToolCall{{ID: "call_px63ad04", Name: "calculate", Arguments: `{"operation":"+","x":"5","y":"3"}`}},
		finish: "tool_calls", prompt: 172, completion: 27,
	},
	{
		file: "vllm_stream_tool_call.sse", stream: true,
		calls:  []agent.ToolCall{{ID: "chatcmpl-tool-ca99dda515524c6abe47d1ea22813507", Name: "run_command", Arguments: `{"command": "ls"}`}},
		finish: "tool_calls",
	},
	{
		file:   "vllm_json_tool_call.json",
		calls:  []agent.ToolCall{{ID: "chatcmpl-tool-5937b489aaa148f0b0e64126fda0a344", Name: "get_weather", Arguments: `{"location": "San Francisco, CA"}`}},
		finish: "tool_calls", prompt: 212, completion: 21,
	},
}

// loadFixture reads a recording without its header: the comment lines at its top.
func loadFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(s, "# Source: ") && !strings.HasPrefix(s, "# Derived") {
		t.Fatalf("%s: the first line must say where the recording comes from", name)
	}
	for strings.HasPrefix(s, "#") {
		_, s, _ = strings.Cut(s, "\n")
	}
	return s
}

// followUpAnswer answers every request after the recorded one, so that an agent run can
// finish after the recorded step.
const followUpAnswer = "Done."

// fixtureClient is a client of an llmtest server that replays the recording to the first
// request.
func fixtureClient(t *testing.T, fx providerFixture) *llm.Client {
	t.Helper()
	srv := llmtest.NewTest(t, llmtest.Recording(loadFixture(t, fx.file)))
	srv.SetFallback(llmtest.Text(followUpAnswer))
	c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "test-model", Stream: fx.stream, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestProviderFixtures runs every recorded reply through the client.
func TestProviderFixtures(t *testing.T) {
	for _, fx := range providerFixtures {
		t.Run(fx.file, func(t *testing.T) {
			reply, err := fixtureClient(t, fx).Complete(context.Background(), userGoal)
			if fx.providerErr != "" {
				var pe *llm.ProviderError
				if !errors.As(err, &pe) || pe.Message != fx.providerErr {
					t.Fatalf("err = %v, want the provider's error %q", err, fx.providerErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if reply.Message.Content != fx.text {
				t.Errorf("content = %q, want %q", reply.Message.Content, fx.text)
			}
			if !slices.Equal(reply.Message.ToolCalls, fx.calls) {
				t.Errorf("calls = %q\nwant %q", reply.Message.ToolCalls, fx.calls)
			}
			if reply.FinishReason != fx.finish {
				t.Errorf("finish = %q, want %q", reply.FinishReason, fx.finish)
			}
			if reply.Usage.PromptTokens != fx.prompt || reply.Usage.CompletionTokens != fx.completion {
				t.Errorf("usage = %d/%d tokens, want %d/%d", reply.Usage.PromptTokens, reply.Usage.CompletionTokens, fx.prompt, fx.completion)
			}
		})
	}
}

// recordingTool is a tool of any name that accepts any object and notes its calls.
type recordingTool struct {
	name  string
	calls chan json.RawMessage
}

func (r *recordingTool) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: r.name, Description: "test tool", Parameters: json.RawMessage(`{"type":"object"}`)}, ReadOnly: true}
}

func (r *recordingTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "test tool"}
}

func (r *recordingTool) Call(_ context.Context, inv agent.Invocation) (string, error) {
	r.calls <- inv.Args
	return "ok", nil
}

// TestProviderFixturesAgentStep takes one agent step on every recorded reply, with the real
// client: the recorded calls run as given, a text reply is the answer, and a reported error
// pauses the run with the provider's message in the log and a safe summary in the state.
func TestProviderFixturesAgentStep(t *testing.T) {
	for _, fx := range providerFixtures {
		t.Run(fx.file, func(t *testing.T) {
			var (
				tools []agent.Tool
				calls = make(chan json.RawMessage, 2*len(fx.calls)+1)
				seen  = map[string]bool{}
			)
			for _, c := range fx.calls {
				if !seen[c.Name] {
					seen[c.Name] = true
					tools = append(tools, &recordingTool{name: c.Name, calls: calls})
				}
			}
			var logs bytes.Buffer
			ag, err := agent.New(agent.Config{}, fixtureClient(t, fx), tools,
				agent.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			st := agent.NewState("run-fixture", "Do what the recording says.", nil, time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
			hooks := agent.Hooks{Checkpoint: func(context.Context, *agent.State) error { return nil }}
			if err := ag.Run(context.Background(), st, hooks); err != nil {
				t.Fatalf("run: %v", err)
			}

			if fx.providerErr != "" {
				if st.Status.Terminal() || st.Pause == nil || st.Pause.Kind != agent.PauseModelError {
					t.Fatalf("status %s, pause %+v; want a pause for a model error", st.Status, st.Pause)
				}
				if strings.Contains(st.Pause.Reason, fx.providerErr) {
					t.Errorf("the thread's summary %q repeats the provider's message", st.Pause.Reason)
				}
				if !strings.Contains(logs.String(), fx.providerErr) {
					t.Errorf("the log does not carry the provider's message %q:\n%s", fx.providerErr, logs.String())
				}
				return
			}
			if st.Status != agent.StatusCompleted {
				t.Fatalf("status = %s (pause %+v, error %q), want completed", st.Status, st.Pause, st.Error)
			}
			want := fx.text
			if len(fx.calls) > 0 {
				want = followUpAnswer
			}
			if st.Answer != want {
				t.Errorf("answer = %q, want %q", st.Answer, want)
			}
			close(calls)
			var got []string
			for args := range calls {
				got = append(got, string(args))
			}
			var wantArgs []string
			for _, c := range fx.calls {
				wantArgs = append(wantArgs, c.Arguments)
			}
			slices.Sort(got)
			slices.Sort(wantArgs)
			if !slices.Equal(got, wantArgs) {
				t.Errorf("tools ran with %q, want %q", got, wantArgs)
			}
		})
	}
}
