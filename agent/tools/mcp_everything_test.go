package tools

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// everythingEnv names the entry point (dist/index.js) of @modelcontextprotocol/server-everything,
// the MCP reference server of the official TypeScript SDK, installed by .ci/run with npm. The
// test runs it from disk over stdio: no network is needed.
const everythingEnv = "LOOPBOT_MCP_EVERYTHING"

// everythingServer returns the server's config, or skips the test when node or the package
// is missing; under CI it fails instead, since .ci/run installs both.
func everythingServer(t *testing.T) MCPServerConfig {
	t.Helper()
	entry := os.Getenv(everythingEnv)
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node is not installed"
	case entry == "":
		missing = everythingEnv + " is not set (npm install @modelcontextprotocol/server-everything and point it at dist/index.js)"
	default:
		if _, err := os.Stat(entry); err != nil {
			missing = err.Error()
		}
	}
	if missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("the reference MCP server is unavailable under CI: %s", missing)
		}
		t.Skipf("the reference MCP server is unavailable: %s", missing)
	}
	return MCPServerConfig{Name: "everything", Command: node, Args: []string{entry, "stdio"}, Risk: agent.RiskSafe}
}

// TestMCPEverythingServer calls tools of the official reference server, including the
// sampling and elicitation tools it registers only for clients that advertise them.
func TestMCPEverythingServer(t *testing.T) {
	sc := everythingServer(t)
	model := &fakeModel{}
	relisted := make(chan string, 16)
	m := NewManager(MCPConfig{Servers: []MCPServerConfig{sc}}, quietLogger(), WithSamplingModel(model))
	m.relisted = func(server string) { relisted <- server }
	m.Start(t.Context())
	t.Cleanup(func() { m.Close() })
	if st := m.Status(); len(st) != 1 || !st[0].Up {
		t.Fatalf("status = %+v", st)
	}

	echo := toolByName(t, m.Tools(), "everything__echo")
	if out, err := call(t, echo, "r1", map[string]any{"message": "hello from loopbot"}); err != nil || !strings.Contains(out, "Echo: hello from loopbot") {
		t.Errorf("echo = %q, %v", out, err)
	}

	// The server adds its client-dependent tools after the handshake and says so.
	receive(t, relisted, "tool list refresh")
	sample := toolByName(t, m.Tools(), "everything__trigger-sampling-request")
	out, err := call(t, sample, "run-e2e", map[string]any{"prompt": "greet", "maxTokens": 50})
	if err != nil || !strings.Contains(out, "the model says hi") || !strings.Contains(out, "consulted the model 1 time(s)") {
		t.Errorf("trigger-sampling-request = %q, %v", out, err)
	}
	if reqs := model.requests(); len(reqs) != 1 || reqs[0].MaxTokens != 50 || !strings.Contains(reqs[0].Messages[len(reqs[0].Messages)-1].Content, "greet") {
		t.Errorf("model requests = %+v", reqs)
	}

	// With nobody to ask, the form is declined; asked, the person's answers reach the
	// server, typed as its schema says.
	elicit := toolByName(t, m.Tools(), "everything__trigger-elicitation-request")
	out, err = call(t, elicit, "run-e2e", map[string]any{})
	if err != nil || !strings.Contains(out, "User declined") || !strings.Contains(out, "loopbot could not relay it") {
		t.Errorf("trigger-elicitation-request = %q, %v", out, err)
	}
	var asked []agent.Question
	answer := func(ctx context.Context, runID, callID string, q agent.Question) (agent.Answer, error) {
		asked = append(asked, q)
		given := func(s string) (agent.Answer, error) {
			return agent.Answer{Kind: agent.AnswerGiven, Text: s, By: "ann"}, nil
		}
		switch {
		case strings.Contains(q.Text, "**String**"):
			return given("Ann Example")
		case strings.Contains(q.Text, "**Integer**"):
			return given("7")
		case strings.Contains(q.Text, "**Number in range 1-1000**"):
			return given("2.5")
		case strings.Contains(q.Text, "**Untitled Multiple Select Enum**"):
			return given("Guitar, Piano")
		case len(q.Options) > 0:
			return given(q.Options[0])
		}
		return agent.Answer{Kind: agent.AnswerSkipped, By: "ann"}, nil
	}
	ctx := agent.WithAsk(t.Context(), "run-e2e", "c2", answer)
	out, err = elicit.Call(ctx, agent.Invocation{RunID: "run-e2e", CallID: "c2", Args: []byte(`{}`)})
	for _, want := range []string{"User provided the requested information", "- Name: Ann Example", "- Agreed to terms: true", "- Favorite Integer: 7",
		"- Favorite Number: 2.5", `"untitledSingleSelectEnum": "Monica"`, `"titledSingleSelectEnum": "hero-1"`, `"legacyTitledEnum": "pet-1"`,
		`"Guitar",`, "answered by ann"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("trigger-elicitation-request with answers lacks %q: %q, %v", want, out, err)
		}
	}
	if len(asked) != 13 || asked[0].Optional || !strings.Contains(asked[0].Text, "Your full, legal name") {
		t.Errorf("%d questions asked, the first %+v; want 13, the required name first", len(asked), asked[0])
	}
	for _, tool := range m.Tools() {
		if name := tool.Info().Spec.Name; name == "everything__get-roots-list" || name == "everything__trigger-url-elicitation" {
			t.Errorf("the server offers %s, so loopbot advertised a capability it does not serve", name)
		}
	}
}
