package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/tools"
)

// TestDemoStreamsAnswer: the demo model writes its answer word by word through the text
// hook, as a streaming model would, and what it streamed is the answer.
func TestDemoStreamsAnswer(t *testing.T) {
	set, err := tools.Build(context.Background(), tools.Config{Workspace: filepath.Join(t.TempDir(), "ws"), Files: tools.FilesConfig{Enabled: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	ag, err := agent.New(demoAgentConfig(agent.Config{}), demoModel{pace: 2 * time.Millisecond}, set.Tools())
	if err != nil {
		t.Fatal(err)
	}
	st := agent.NewState("demo-run", "tidy up the release notes", nil, time.Now())
	var streamed strings.Builder
	pieces := 0
	hooks := agent.Hooks{Text: func(_ context.Context, d agent.TextDelta) {
		if d.Reset {
			streamed.Reset()
			return
		}
		streamed.WriteString(d.Text)
		pieces++
	}}
	ctx := context.Background()
	if err := ag.Run(ctx, st, hooks); err != nil {
		t.Fatal(err)
	}
	p := st.PendingApprovals()
	if len(p) != 1 {
		t.Fatalf("pending = %+v", p)
	}
	if err := st.Decide(p[0].ID, agent.Decision{Approved: true, By: "web:ann"}); err != nil {
		t.Fatal(err)
	}
	if err := ag.Run(ctx, st, hooks); err != nil {
		t.Fatal(err)
	}
	if st.Status != agent.StatusCompleted || streamed.String() != st.Answer || pieces < 10 {
		t.Errorf("status %s, streamed %q in %d pieces, answer %q: want the answer streamed word by word", st.Status, streamed.String(), pieces, st.Answer)
	}
}
