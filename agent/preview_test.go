package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// previewTool is a fakeTool that previews its calls.
type previewTool struct {
	fakeTool
	preview  string
	err      error
	previews atomic.Int32
}

func (p *previewTool) Preview(ctx context.Context, inv agent.Invocation) (string, error) {
	p.previews.Add(1)
	return p.preview + " of " + string(inv.Args) + " in " + inv.RunID, p.err
}

// TestPreviewOfCallsAwaitingApproval: a call that needs approval gets its tool's preview
// once, before the run pauses; a preview that fails is left out; calls that run unasked
// are not previewed; a long preview is cut.
func TestPreviewOfCallsAwaitingApproval(t *testing.T) {
	for _, tt := range []struct {
		name    string
		risk    agent.Risk
		preview string
		err     error
		want    string
		n       int32
	}{
		{"awaiting approval", agent.RiskConfirm, "the diff", nil, `the diff of {"q":"1"} in run-`, 1},
		{"a failed preview", agent.RiskConfirm, "", errors.New("disk gone"), "", 1},
		{"a call that runs", agent.RiskSafe, "the diff", nil, "", 0},
		{"cut", agent.RiskConfirm, strings.Repeat("x", 5000), nil, "\n(cut)", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tool := &previewTool{fakeTool: fakeTool{name: "w", risk: tt.risk}, preview: tt.preview, err: tt.err}
			llm := newLLM(t, calls(call("w", `{"q":"1"}`)), text("done"))
			r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{tool}), "x")
			r.advance()
			if n := tool.previews.Load(); n != tt.n {
				t.Errorf("previewed %d times, want %d", n, tt.n)
			}
			c := r.st.Call(r.st.Calls[0].ID)
			if !strings.Contains(c.Preview, tt.want) || tt.want == "" && c.Preview != "" || len(c.Preview) > 4200 {
				t.Errorf("preview %q, want %q", c.Preview, tt.want)
			}
		})
	}
}
