package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// needBwrap skips sandbox tests on machines without bubblewrap, naming what to install; the
// refusal without it is tested separately. Under CI a missing bubblewrap fails instead.
func needBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("bubblewrap is not installed, and CI is set: install it (Debian: apt-get install -y bubblewrap)")
		}
		t.Skip("bubblewrap is not installed; install it (Debian: apt-get install -y bubblewrap) to run this test")
	}
}

func shellTool(t *testing.T, cfg ShellConfig) (*Shell, string) {
	t.Helper()
	ws, err := NewWorkspaces(filepath.Join(t.TempDir(), "ws"), LimitsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := ws.Dir("r1")
	if err != nil {
		t.Fatal(err)
	}
	return NewShell(ws, cfg, LimitsConfig{}), dir
}

func runShell(t *testing.T, s *Shell, command string) (string, error) {
	t.Helper()
	return call(t, s, "r1", map[string]any{"command": command})
}

func TestShellSandboxWorkspace(t *testing.T) {
	needBwrap(t)
	s, dir := shellTool(t, ShellConfig{})
	out, err := runShell(t, s, "pwd; echo hello > made.txt; cat made.txt; echo oops >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"exit code: 3", "--- stdout ---\n" + dir + "\nhello", "--- stderr ---\noops"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "made.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("made.txt = %q, %v", b, err)
	}
}

func TestShellSandboxCannotWriteOutside(t *testing.T) {
	needBwrap(t)
	s, dir := shellTool(t, ShellConfig{})
	parent := filepath.Dir(dir)
	outsideDir := t.TempDir()
	secretPath := filepath.Join(outsideDir, "secret.txt")
	if err := os.WriteFile(secretPath, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	attempts := []string{
		"touch /usr/pwned",
		"echo x > /etc/pwned",
		"echo x > ../escaped.txt",
		"echo x > " + filepath.Join(outsideDir, "pwned.txt"),
		"cat " + secretPath,
		"ln -s " + outsideDir + " link && echo x > link/pwned.txt",
		"echo x > /tmp/pwned",
	}
	for _, cmd := range attempts {
		out, err := runShell(t, s, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if strings.Contains(out, secret) {
			t.Errorf("%s revealed a file outside the workspace:\n%s", cmd, out)
		}
	}
	for _, p := range []string{"/usr/pwned", "/etc/pwned", filepath.Join(parent, "escaped.txt"), filepath.Join(outsideDir, "pwned.txt"), "/tmp/pwned"} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after the sandboxed commands (stat: %v)", p, err)
		}
	}
}

func TestShellSandboxNetwork(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	srv, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") })
	cmd := "curl -sS --max-time 5 " + srv.URL

	s, _ := shellTool(t, ShellConfig{})
	out, err := runShell(t, s, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "reached") || strings.Contains(out, "exit code: 0") || hits.Load() != 0 {
		t.Errorf("the sandbox reached the host's loopback server:\n%s", out)
	}

	// Sharing the network is what makes the same command work.
	s, _ = shellTool(t, ShellConfig{AllowNetwork: true})
	if out, err := runShell(t, s, cmd); err != nil || !strings.Contains(out, "reached") {
		t.Errorf("with allow_network the command = %q, %v", out, err)
	}
}

// processesWith returns the command lines of live processes that mention token.
func processesWith(t *testing.T, token string) []string {
	t.Helper()
	paths, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended while we looked
		}
		if line := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(line, token) {
			found = append(found, line)
		}
	}
	return found
}

func TestShellTimeoutKillsChildren(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc to look for processes in")
	}
	tests := []struct {
		name  string
		cfg   ShellConfig
		bwrap bool
	}{
		{"sandboxed", ShellConfig{}, true},
		{"unsandboxed", ShellConfig{Bwrap: "/nonexistent/bwrap", AllowUnsandboxed: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.bwrap {
				needBwrap(t)
			}
			tt.cfg.Timeout = agent.Duration(300 * time.Millisecond)
			s, dir := shellTool(t, tt.cfg)
			// A unique sleep length marks every process of this command: the shell, its
			// background subshell and their sleeps all carry it in their command lines.
			token := fmt.Sprintf("%d", 500000+rand.IntN(400000))
			cmd := fmt.Sprintf("(sleep %s; touch later.txt) & sleep %s.5; echo never", token, token)
			out, err := runShell(t, s, cmd)
			if err == nil || !strings.Contains(err.Error(), "time limit") {
				t.Fatalf("command past its time limit = %q, %v", out, err)
			}
			// The kill is sent before Call returns; the kernel tears the processes down
			// right after. Wait for that, bounded, rather than guess how long it takes.
			deadline := time.Now().Add(10 * time.Second)
			for {
				left := processesWith(t, token)
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("processes survived the timeout: %q", left)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// No process that could write it is left, so it can never appear.
			if _, err := os.Stat(filepath.Join(dir, "later.txt")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("later.txt was written: %v", err)
			}
			if strings.Contains(out, "never") {
				t.Errorf("the command ran to its end: %q", out)
			}
		})
	}
}

func TestShellWithoutBwrap(t *testing.T) {
	s, dir := shellTool(t, ShellConfig{Bwrap: "/nonexistent/bwrap"})
	out, err := runShell(t, s, "touch ran.txt")
	if !errors.Is(err, ErrNoSandbox) || !strings.Contains(err.Error(), "allow_unsandboxed") {
		t.Errorf("shell without bubblewrap = %q, %v; want a refusal naming allow_unsandboxed", out, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the command ran anyway")
	}

	s, dir = shellTool(t, ShellConfig{Bwrap: "/nonexistent/bwrap", AllowUnsandboxed: true})
	if out, err := runShell(t, s, "touch ran.txt && pwd"); err != nil || !strings.Contains(out, dir) {
		t.Errorf("unsandboxed shell = %q, %v", out, err)
	}
}

func TestShellOutputCap(t *testing.T) {
	s, _ := shellTool(t, ShellConfig{Bwrap: "/nonexistent/bwrap", AllowUnsandboxed: true, MaxOutput: 100})
	out, err := runShell(t, s, "seq 1 1000; seq 1 1000 >&2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[stdout truncated: 3793 more bytes not shown]", "[stderr truncated: 3793 more bytes not shown]", "exit code: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if len(out) > 400 {
		t.Errorf("output is %d bytes, over the caps", len(out))
	}
}

func TestShellAssess(t *testing.T) {
	tests := []struct {
		cfg  ShellConfig
		args string
		want agent.Risk
	}{
		{ShellConfig{}, `{"command":"ls"}`, agent.RiskCautious},
		{ShellConfig{SafeReadonly: true}, `{"command":"ls"}`, agent.RiskSafe},
		{ShellConfig{SafeReadonly: true, Risk: agent.RiskConfirm}, `{"command":"ls"}`, agent.RiskConfirm},
		{ShellConfig{Risk: agent.RiskSafe}, `{"command":"rm -rf ~"}`, agent.RiskDangerous},
		{ShellConfig{}, `{"command":`, agent.RiskConfirm},
	}
	for _, tt := range tests {
		s := NewShell(nil, tt.cfg, LimitsConfig{})
		if got := s.Assess(json.RawMessage(tt.args)); got.Risk != tt.want {
			t.Errorf("Assess(%s) with %+v = %s (%s), want %s", tt.args, tt.cfg, got.Risk, got.Reason, tt.want)
		}
	}
}

// TestFlowAssessments checks what the tools tell the data-flow guard: what a call reads from
// outside, where it could send data, and whether it carries data of the model's choosing.
func TestFlowAssessments(t *testing.T) {
	fetch, err := NewHTTPFetch(HTTPFetchConfig{Enabled: true, Methods: []string{"GET", "POST"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		tool         agent.Tool
		args         string
		reads, sends string
		carries      bool
	}{
		{"bare GET", fetch, `{"url":"https://docs.example/guide"}`, "https://docs.example/guide", "docs.example", false},
		{"GET with a query", fetch, `{"url":"https://x.example/a?t=1"}`, "https://x.example/a", "x.example", true},
		{"GET with headers", fetch, `{"url":"https://x.example/a","headers":{"X-Data":"1"}}`, "https://x.example/a", "x.example", true},
		{"POST", fetch, `{"url":"https://x.example/a","method":"POST","body":"d"}`, "https://x.example/a", "x.example", true},
		{"user info", fetch, `{"url":"https://u:p@x.example/"}`, "https://x.example/", "x.example", true},
		{"shell without network", NewShell(nil, ShellConfig{}, LimitsConfig{}), `{"command":"ls"}`, "", "", false},
		{"shell with network", NewShell(nil, ShellConfig{AllowNetwork: true}, LimitsConfig{}), `{"command":"ls"}`, "", "the network", true},
	}
	for _, tt := range tests {
		as := tt.tool.Assess(json.RawMessage(tt.args))
		if as.Reads != tt.reads || as.Sends != tt.sends || as.Carries != tt.carries {
			t.Errorf("%s: reads %q sends %q carries %v; want %q %q %v", tt.name, as.Reads, as.Sends, as.Carries, tt.reads, tt.sends, tt.carries)
		}
	}
}
