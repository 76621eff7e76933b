package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// flowTool is a fake tool whose assessment says what it reads and where it sends.
type flowTool struct {
	*fakeTool
	reads, sends string
	carries      bool
}

func (f flowTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "test", Reads: f.reads, Sends: f.sends, Carries: f.carries}
}

// TestDataFlowGuard walks the rules: exposure comes from a call that read outside content and
// ran; after it, a call that can send data waits for a person, unless the goal named its
// destination and it carries nothing of the model's choosing; a secret is refused always.
func TestDataFlowGuard(t *testing.T) {
	tests := []struct {
		name      string
		goal      string
		readFirst bool // a call that reads outside content runs in the step before
		carries   bool
		args      string
		want      agent.CallStatus
	}{
		{"not exposed", "post the summary", false, true, `{"q":"x"}`, agent.CallSucceeded},
		{"exposed, carries data", "post the summary", true, true, `{"q":"x"}`, agent.CallAwaitingApproval},
		{"exposed, host not in the goal", "post the summary", true, false, `{"q":"x"}`, agent.CallAwaitingApproval},
		{"exposed, goal names the host, nothing carried", "post it to sink.example", true, false, `{"q":"x"}`, agent.CallSucceeded},
		{"exposed, goal names the host, data carried", "post it to sink.example", true, true, `{"q":"x"}`, agent.CallAwaitingApproval},
		{"secret, not exposed", "post the summary", false, true, `{"q":"sk_live_secret"}`, agent.CallInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := flowTool{fakeTool: &fakeTool{name: "read", readOnly: true}, reads: "https://page.example/x"}
			send := flowTool{fakeTool: &fakeTool{name: "send", readOnly: true}, sends: "sink.example", carries: tt.carries}
			var steps []step
			if tt.readFirst {
				steps = append(steps, calls(call("read", `{"q":"page"}`)))
			}
			steps = append(steps, calls(call("send", tt.args)), text("done"))
			llm := newLLM(t, steps...)
			ag := newAgent(t, llm.model, agent.Config{}, []agent.Tool{read, send},
				agent.WithSecretScan(func(s string) bool { return strings.Contains(s, "sk_live_") }))
			r := newRun(t, ag, tt.goal)
			r.advance()
			c := r.st.Calls[len(r.st.Calls)-1]
			if c.Status != tt.want {
				t.Fatalf("send call is %s (%q, %q), want %s", c.Status, c.RiskReason, c.Error, tt.want)
			}
			if tt.want == agent.CallAwaitingApproval && c.RiskReason != "this run has read https://page.example/x; this call would send data to sink.example" {
				t.Errorf("card reason %q", c.RiskReason)
			}
			if tt.want != agent.CallSucceeded && send.calls.Load() != 0 {
				t.Errorf("the send tool ran %d times", send.calls.Load())
			}
		})
	}
}
