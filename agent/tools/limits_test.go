package tools

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

func limitedShell(t *testing.T, limits LimitsConfig) (*Shell, string) {
	t.Helper()
	needBwrap(t)
	ws, err := NewWorkspaces(filepath.Join(t.TempDir(), "ws"), limits)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := ws.Dir("r1")
	if err != nil {
		t.Fatal(err)
	}
	return NewShell(ws, ShellConfig{Timeout: agent.Duration(2 * time.Minute)}, limits), dir
}

// wantLimit checks that a call failed on a limit and that its error names the config key.
func wantLimit(t *testing.T, out string, err error, key string) {
	t.Helper()
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), key) {
		t.Fatalf("err = %v; want a limit error naming %s (output %q)", err, key, out)
	}
}

// TestShellLimitsApplied looks at the limits from inside the sandbox.
func TestShellLimitsApplied(t *testing.T) {
	s, _ := limitedShell(t, LimitsConfig{MemoryMiB: 100, FileSizeMiB: 3, TmpMiB: 5, Processes: 40})
	out, err := runShell(t, s, "cat /proc/self/limits; df -k /tmp")
	if err != nil {
		t.Fatalf("%q, %v", out, err)
	}
	for _, want := range []string{
		fmt.Sprintf("Max data size             %d", 100<<20),
		fmt.Sprintf("Max file size             %d", 3<<20),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`tmpfs\s+5120\s`).MatchString(out) {
		t.Errorf("/tmp is not 5 MiB:\n%s", out)
	}
	// With a cgroup, TestShellProcessLimit shows the limit at work; the sandbox's own cgroup
	// namespace hides the cgroup's name from the command.
	if !s.groups.pids() && !strings.Contains(out, "Max processes             40") {
		t.Errorf("without a cgroup, RLIMIT_NPROC is not set:\n%s", out)
	}
}

func TestShellFileSizeLimit(t *testing.T) {
	s, dir := limitedShell(t, LimitsConfig{FileSizeMiB: 1})
	out, err := runShell(t, s, "head -c 2097152 /dev/zero > big; echo after")
	wantLimit(t, out, err, "tools.limits.file_size_mib")
	if fi, err := os.Stat(filepath.Join(dir, "big")); err != nil || fi.Size() > 1<<20 {
		t.Errorf("big: %v, %v; want at most 1 MiB", fi.Size(), err)
	}
}

func TestShellTmpLimit(t *testing.T) {
	s, _ := limitedShell(t, LimitsConfig{TmpMiB: 1})
	out, err := runShell(t, s, "head -c 2097152 /dev/zero > /tmp/big")
	wantLimit(t, out, err, "tools.limits.tmp_mib")
}

// TestShellWorkspaceLimitKills fills the workspace and waits: the watcher must kill the command.
func TestShellWorkspaceLimitKills(t *testing.T) {
	s, dir := limitedShell(t, LimitsConfig{WorkspaceMiB: 2})
	out, err := runShell(t, s, "for f in a b c; do head -c 1048576 /dev/urandom > $f; done; exec sleep 30 # ws-token-5531")
	wantLimit(t, out, err, "tools.limits.workspace_mib")
	if !strings.Contains(err.Error(), "killed") {
		t.Errorf("err = %v; want the command killed", err)
	}
	waitGone(t, "ws-token-5531")
	// A workspace over its limit may still be cleaned up.
	if out, err := runShell(t, s, "rm a b c"); err != nil {
		t.Errorf("rm in a full workspace: %q, %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a: %v", err)
	}
}

// TestShellWorkspaceLimitAfter fills the workspace faster than it is watched: the check after
// the command must see it.
func TestShellWorkspaceLimitAfter(t *testing.T) {
	s, _ := limitedShell(t, LimitsConfig{WorkspaceMiB: 1, WorkspaceFiles: 30})
	s.poll = time.Hour
	out, err := runShell(t, s, "head -c 2097152 /dev/urandom > a")
	wantLimit(t, out, err, "tools.limits.workspace_mib")
	out, err = runShell(t, s, "rm a; mkdir d; for i in $(seq 40); do : > d/$i; done")
	wantLimit(t, out, err, "tools.limits.workspace_files")
}

func TestWriteFileWorkspaceLimit(t *testing.T) {
	ws, err := NewWorkspaces(filepath.Join(t.TempDir(), "ws"), LimitsConfig{WorkspaceMiB: 1, WorkspaceFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	write := NewWriteFile(ws, FilesConfig{MaxWriteBytes: 1 << 20})
	half := strings.Repeat("x", 600<<10)
	if _, err := call(t, write, "r1", map[string]any{"path": "a", "content": half}); err != nil {
		t.Fatal(err)
	}
	// Replacing a file counts what it frees.
	if _, err := call(t, write, "r1", map[string]any{"path": "a", "content": half}); err != nil {
		t.Fatalf("replace a: %v", err)
	}
	_, err = call(t, write, "r1", map[string]any{"path": "b", "content": half})
	wantLimit(t, "", err, "tools.limits.workspace_mib")
	for _, p := range []string{"c", "d", "e"} {
		_, err = call(t, write, "r1", map[string]any{"path": p, "content": "x"})
	}
	wantLimit(t, "", err, "tools.limits.workspace_files")
}

// TestShellMemoryLimit runs out of memory in one process, which RLIMIT_DATA stops, and in
// /tmp's pages, which only a cgroup counts.
func TestShellMemoryLimit(t *testing.T) {
	t.Run("process", func(t *testing.T) {
		s, _ := limitedShell(t, LimitsConfig{MemoryMiB: 64})
		out, err := runShell(t, s, `awk 'BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s }'`)
		wantLimit(t, out, err, "tools.limits.memory_mib")
	})
	t.Run("cgroup", func(t *testing.T) {
		s, _ := limitedShell(t, LimitsConfig{MemoryMiB: 32, TmpMiB: 200})
		if !s.groups.memory() {
			t.Skip("no writable cgroup with the memory controller")
		}
		out, err := runShell(t, s, "head -c 100000000 /dev/zero > /tmp/x; echo done")
		wantLimit(t, out, err, "killed at the memory limit of 32 MiB (tools.limits.memory_mib)")
	})
}

// TestShellProcessLimit needs a writable cgroup with the pids controller: RLIMIT_NPROC alone
// does not bound root, who runs these tests.
func TestShellProcessLimit(t *testing.T) {
	s, _ := limitedShell(t, LimitsConfig{Processes: 20})
	if !s.groups.pids() {
		t.Skipf("no process limit to test here: %s", s.groups.note)
	}
	out, err := runShell(t, s, "for i in $(seq 40); do sleep 100 & done 2>/dev/null; kill $(jobs -p)")
	wantLimit(t, out, err, "tools.limits.processes")
}

func TestLimitsValidate(t *testing.T) {
	err := Config{Limits: LimitsConfig{MemoryMiB: -1, WorkspaceFiles: 1 << 41}}.Validate()
	for _, want := range []string{"tools.limits.memory_mib: must not be negative", "tools.limits.workspace_files", "too large"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v; want %q", err, want)
		}
	}
}

func TestFindCgroups(t *testing.T) {
	dir := t.TempDir()
	mounts := filepath.Join(dir, "mounts")
	self := filepath.Join(dir, "cgroup")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A v1 pids hierarchy that is a plain directory, so the probe can make its cgroup; its
	// pids.max appears as the kernel would make it, which a plain directory does not.
	pids := filepath.Join(dir, "pids")
	must(os.MkdirAll(filepath.Join(pids, "bot"), 0o755))
	must(os.WriteFile(mounts, []byte("cgroup "+pids+" cgroup rw,relatime,pids 0 0\n"), 0o644))
	must(os.WriteFile(self, []byte("8:pids:/bot\n0::/\n"), 0o644))
	c := findCgroups(mounts, self)
	if c.pids() || !strings.Contains(c.note, "RLIMIT_NPROC") || !strings.Contains(c.note, "pids.max") {
		t.Errorf("a hierarchy without pids.max was taken: %+v", c)
	}
	if c := findCgroups(filepath.Join(dir, "none"), self); c.pids() || c.note == "" {
		t.Errorf("no cgroup mounts: %+v", c)
	}
}

// TestFindCgroupsV2Delegated lays out a delegated cgroup v2 in a directory: the bot, alone in
// its cgroup, moves into a leaf and enables pids and memory for the commands' cgroups. A
// cgroup shared with another process is left alone.
func TestFindCgroupsV2Delegated(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	tests := []struct {
		name, procs string
		wantPids    bool
	}{
		{"alone", self + "\n", true},
		{"shared", self + "\n1\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			bot := filepath.Join(dir, "fs", "bot")
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(os.MkdirAll(bot, 0o755))
			must(os.WriteFile(filepath.Join(bot, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644))
			must(os.WriteFile(filepath.Join(bot, "cgroup.subtree_control"), nil, 0o644))
			must(os.WriteFile(filepath.Join(bot, "cgroup.procs"), []byte(tt.procs), 0o644))
			mounts := filepath.Join(dir, "mounts")
			must(os.WriteFile(mounts, []byte("cgroup2 "+filepath.Join(dir, "fs")+" cgroup2 rw 0 0\n"), 0o644))
			selfFile := filepath.Join(dir, "cgroup")
			must(os.WriteFile(selfFile, []byte("0::/bot\n"), 0o644))

			c := findCgroups(mounts, selfFile)
			if c.pids() != tt.wantPids {
				t.Fatalf("pids = %v, want %v (%+v)", c.pids(), tt.wantPids, c)
			}
			moved, _ := os.ReadFile(filepath.Join(bot, "loopbot-main", "cgroup.procs"))
			enabled, _ := os.ReadFile(filepath.Join(bot, "cgroup.subtree_control"))
			if !tt.wantPids {
				if len(moved) > 0 || len(enabled) > 0 || !strings.Contains(c.note, "other than the bot") {
					t.Errorf("a shared cgroup was changed: moved %q, enabled %q, note %q", moved, enabled, c.note)
				}
				return
			}
			if string(moved) != self || string(enabled) != "+pids +memory" || !c.memory() || c.hiers[0].dir != bot {
				t.Errorf("moved %q, enabled %q, cgroups %+v", moved, enabled, c)
			}
		})
	}
}

func TestShellWithoutPrlimit(t *testing.T) {
	needBwrap(t)
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	ws, err := NewWorkspaces(filepath.Join(t.TempDir(), "ws"), LimitsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s := NewShell(ws, ShellConfig{Bwrap: bwrap}, LimitsConfig{})
	out, err := runShell(t, s, "echo ran")
	if err == nil || !strings.Contains(err.Error(), "util-linux") || strings.Contains(out, "ran") {
		t.Errorf("shell without prlimit = %q, %v; want a refusal naming util-linux", out, err)
	}
}
