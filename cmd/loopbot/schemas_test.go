package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"slices"
	"testing"
)

// The agent compiles tool schemas when a run first needs them, so a built-in tool with a
// schema that does not compile would fail every run. This test compiles every schema of the
// tools the daemon registers with every built-in tool on: the loop's own, the built-in
// tools and the bot's.
func TestEveryToolSchemaCompiles(t *testing.T) {
	dir := t.TempDir()
	logs := &bytes.Buffer{}
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, logs
	m.Getenv = func(string) string { return "" }
	if err := m.ParseFlags(context.Background(), []string{"-db", filepath.Join(dir, "loopbot.db"), "-web", "127.0.0.1:0", "-admin", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	m.Config.Tools.Workspace = filepath.Join(dir, "ws")
	m.Config.Tools.Shell.Enabled, m.Config.Tools.Files.Enabled, m.Config.Tools.HTTPFetch.Enabled = true, true, true
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("run: %v\n%s", err, logs)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	var names []string
	for _, s := range m.srv.agent.Specs() {
		names = append(names, s.Name)
	}
	for _, want := range []string{"update_plan", "ask_user", "read_output", "http_fetch", "shell", "read_file", "write_file", "list_files", "remember"} {
		if !slices.Contains(names, want) {
			t.Errorf("the daemon registers no tool %s (it has %v)", want, names)
		}
	}
	if err := m.srv.agent.CheckSchemas(); err != nil {
		t.Error(err)
	}
}
