package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/tools"
)

// TestMeteredToolsKeepPreviews: the metrics wrapper every tool runs in keeps write_file's
// preview, so the daemon's approval cards show the diff, and a tool without one previews
// nothing.
func TestMeteredToolsKeepPreviews(t *testing.T) {
	ws, err := tools.NewWorkspaces(t.TempDir(), tools.LimitsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := ws.Dir("r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.md"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := tools.FilesConfig{Enabled: true}
	wrapped := newMetrics().tools([]agent.Tool{tools.NewWriteFile(ws, cfg), tools.NewListFiles(ws, cfg)})
	args, _ := json.Marshal(map[string]string{"path": "a.md", "content": "new\n"})
	inv := agent.Invocation{RunID: "r1", CallID: "c1", Args: args}
	p, ok := wrapped[0].(agent.Previewer)
	if !ok {
		t.Fatal("the metered write_file is no Previewer")
	}
	if out, err := p.Preview(context.Background(), inv); err != nil || !strings.Contains(out, "-old\n+new") {
		t.Errorf("metered write_file previews %q, %v; want the diff", out, err)
	}
	if out, err := wrapped[1].(agent.Previewer).Preview(context.Background(), inv); out != "" || err != nil {
		t.Errorf("metered list_files previews %q, %v; want nothing", out, err)
	}
}
