package tools

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// TestToolsHonourCancelledContext calls every tool with a context that is already done: each
// must return its error at once and do nothing.
func TestToolsHonourCancelledContext(t *testing.T) {
	ws, dir := escapeFixture(t)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	fetch := fetchTool(t, HTTPFetchConfig{Allow: []string{"127.0.0.1"}})

	m := NewManager(MCPConfig{Servers: []MCPServerConfig{stdioServer("local")}}, quietLogger())
	m.Start(t.Context())
	t.Cleanup(func() { m.Close() })

	tests := []struct {
		tool agent.Tool
		args string
	}{
		{NewReadFile(ws, FilesConfig{}), `{"path":"sub/hello.txt"}`},
		{NewWriteFile(ws, FilesConfig{}), `{"path":"new.txt","content":"x"}`},
		{NewListFiles(ws, FilesConfig{}), `{}`},
		{fetch, `{"url":"` + srv.URL + `"}`},
		{toolByName(t, m.Tools(), "local__echo"), `{"text":"hi"}`},
	}
	if _, err := os.Stat("/usr/bin/bwrap"); err == nil {
		tests = append(tests, struct {
			tool agent.Tool
			args string
		}{NewShell(ws, ShellConfig{}, LimitsConfig{}), `{"command":"touch ran.txt"}`})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range tests {
		name := tt.tool.Info().Spec.Name
		err := within(t, name, func() error {
			_, err := tt.tool.Call(ctx, agent.Invocation{RunID: "r1", CallID: "c1", Args: json.RawMessage(tt.args)})
			return err
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v; want context.Canceled", name, err)
		}
	}
	for _, f := range []string{"new.txt", "ran.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s was made under a cancelled context", f)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("http_fetch reached the server %d times under a cancelled context", n)
	}
}

// TestShellCancelStopsCommand cancels a running command: the call returns the context's error
// and the command's processes are gone.
func TestShellCancelStopsCommand(t *testing.T) {
	needBwrap(t)
	s, dir := shellTool(t, ShellConfig{})
	if err := syscall.Mkfifo(filepath.Join(dir, "ready"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.Call(ctx, agent.Invocation{RunID: "r1", CallID: "c1", Args: json.RawMessage(`{"command":"echo up > ready; exec sleep 300 # cancel-token-7311"}`)})
		done <- err
	}()
	// Opening the FIFO waits for the command to open it: the command is running.
	b, err := os.ReadFile(filepath.Join(dir, "ready"))
	if err != nil || strings.TrimSpace(string(b)) != "up" {
		t.Fatalf("ready = %q, %v", b, err)
	}
	cancel()
	err = within(t, "cancelled shell", func() error { return <-done })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled shell: %v; want context.Canceled", err)
	}
	waitGone(t, "cancel-token-7311")
}

// waitGone waits, bounded, until no process mentions token: the kill is sent before Call
// returns and the kernel tears the processes down right after.
func waitGone(t *testing.T, token string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := processesWith(t, token)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes survived: %q", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
