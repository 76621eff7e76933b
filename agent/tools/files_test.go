package tools

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

const secret = "TOP-SECRET-outside-the-workspace"

// escapeFixture builds a workspace root whose run "r1" holds ordinary files and symlinks that
// lead outside, directly and through chains, to a directory holding a secret.
func escapeFixture(t testing.TB) (*Workspaces, string) {
	t.Helper()
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := NewWorkspaces(filepath.Join(base, "ws"), LimitsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := ws.Dir("r1")
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "sub", "hello.txt"), []byte("hello\n"), 0o644))
	must(os.Symlink(outside, filepath.Join(dir, "out")))
	must(os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "abs-secret")))
	must(os.Symlink("../../outside/secret.txt", filepath.Join(dir, "rel-secret")))
	must(os.Symlink("chain2", filepath.Join(dir, "chain1")))
	must(os.Symlink("sub/../out/secret.txt", filepath.Join(dir, "chain2")))
	must(os.Symlink("sub/hello.txt", filepath.Join(dir, "inside-link")))
	return ws, dir
}

func call(t *testing.T, tool agent.Tool, runID string, args any) (string, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return tool.Call(context.Background(), agent.Invocation{RunID: runID, CallID: "c1", Args: raw})
}

func TestFilesRefuseEscapes(t *testing.T) {
	ws, _ := escapeFixture(t)
	read := NewReadFile(ws, FilesConfig{})
	write := NewWriteFile(ws, FilesConfig{})
	list := NewListFiles(ws, FilesConfig{})
	for _, p := range []string{
		"../outside/secret.txt", "../../outside/secret.txt", "sub/../../outside/secret.txt", "..",
		"/etc/passwd", "/" + "outside/secret.txt", `\etc\passwd`,
		"out/secret.txt", "abs-secret", "rel-secret", "chain1", "chain2", "out", "out/",
	} {
		t.Run(p, func(t *testing.T) {
			out, err := call(t, read, "r1", map[string]any{"path": p})
			if err == nil || strings.Contains(out, secret) {
				t.Errorf("read_file %q = %q, %v; want a refusal", p, out, err)
			}
			out, err = call(t, list, "r1", map[string]any{"path": p})
			if err == nil {
				t.Errorf("list_files %q = %q; want a refusal", p, out)
			}
			if _, err := call(t, write, "r1", map[string]any{"path": p + "/new.txt", "content": "x"}); err == nil {
				t.Errorf("write_file under %q succeeded; want a refusal", p)
			}
		})
	}
	// A write through a symlink that points outside must not touch the target.
	if _, err := call(t, write, "r1", map[string]any{"path": "abs-secret", "content": "overwritten"}); err == nil {
		t.Error("write_file through a symlink to outside succeeded")
	}
	base := filepath.Dir(ws.root)
	if b, _ := os.ReadFile(filepath.Join(base, "outside", "secret.txt")); string(b) != secret {
		t.Errorf("secret file now holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(base, "outside", "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file appeared outside the workspace: %v", err)
	}
}

func TestFilesInsideWorkspace(t *testing.T) {
	ws, dir := escapeFixture(t)
	read := NewReadFile(ws, FilesConfig{MaxReadBytes: 4})
	write := NewWriteFile(ws, FilesConfig{MaxWriteBytes: 16})
	list := NewListFiles(ws, FilesConfig{})

	if out, err := call(t, write, "r1", map[string]any{"path": "a/b/c.txt", "content": "abcdefgh"}); err != nil {
		t.Fatalf("write_file: %v", err)
	} else if !strings.Contains(out, "8 bytes") {
		t.Errorf("write_file said %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a", "b", "c.txt")); err != nil || string(b) != "abcdefgh" {
		t.Fatalf("file holds %q, %v", b, err)
	}
	if _, err := call(t, write, "r1", map[string]any{"path": "big.txt", "content": strings.Repeat("x", 17)}); err == nil {
		t.Error("write_file over the cap succeeded")
	}

	tests := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "a/b/c.txt"}, "abcd\n[truncated: bytes 0 to 4 of 8 shown; call read_file again with offset=4 for more]"},
		{map[string]any{"path": "a/b/c.txt", "offset": 4}, "efgh"},
		{map[string]any{"path": "./sub/../inside-link"}, "hell\n[truncated"},
	}
	for _, tt := range tests {
		out, err := call(t, read, "r1", tt.args)
		if err != nil || !strings.HasPrefix(out, tt.want) {
			t.Errorf("read_file %v = %q, %v; want prefix %q", tt.args, out, err, tt.want)
		}
	}
	if _, err := call(t, read, "r1", map[string]any{"path": "missing.txt"}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("read_file of a missing file: %v", err)
	}

	out, err := call(t, list, "r1", map[string]any{"recursive": true})
	if err != nil {
		t.Fatalf("list_files: %v", err)
	}
	for _, want := range []string{"a/\n", "a/b/c.txt  8 bytes\n", "sub/hello.txt  6 bytes\n", "out -> "} {
		if !strings.Contains(out, want) {
			t.Errorf("listing lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret.txt  ") {
		t.Errorf("listing followed a symlink outside:\n%s", out)
	}
	out, err = call(t, list, "r1", map[string]any{"path": "a"})
	if err != nil || out != "b/\n" {
		t.Errorf("list_files a = %q, %v", out, err)
	}

	// Runs never share a workspace.
	if _, err := call(t, read, "r2", map[string]any{"path": "a/b/c.txt"}); err == nil {
		t.Error("run r2 read a file of run r1")
	}
}

func TestFilesBinaryAndListCap(t *testing.T) {
	ws, dir := escapeFixture(t)
	if err := os.WriteFile(filepath.Join(dir, "bin"), []byte{1, 0, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, NewReadFile(ws, FilesConfig{}), "r1", map[string]any{"path": "bin"}); err == nil || !strings.Contains(err.Error(), "binary") {
		t.Errorf("read_file of a binary file: %v", err)
	}
	out, err := call(t, NewListFiles(ws, FilesConfig{MaxEntries: 2}), "r1", map[string]any{})
	if err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, "stopped at 2 entries") {
		t.Errorf("capped listing = %q, %v", out, err)
	}
}

func TestSanitizeRunID(t *testing.T) {
	tests := []struct {
		id   string
		keep bool
	}{
		{"run-123_abc.def", true},
		{"", false},
		{".", false},
		{"..", false},
		{"../../etc", false},
		{"a/b", false},
		{"a_b", true},
		{strings.Repeat("x", 65), false},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := SanitizeRunID(tt.id)
		if (got == tt.id) != tt.keep {
			t.Errorf("SanitizeRunID(%q) = %q; keep=%v", tt.id, got, tt.keep)
		}
		if got == "" || strings.ContainsAny(got, `/\`) || strings.Trim(got, ".") == "" || len(got) > 64 {
			t.Errorf("SanitizeRunID(%q) = %q is not one safe name", tt.id, got)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%q and %q share workspace %q", prev, tt.id, got)
		}
		seen[got] = tt.id
	}
}

func TestFilesRisk(t *testing.T) {
	ws, _ := escapeFixture(t)
	tests := []struct {
		tool agent.Tool
		want agent.Risk
	}{
		{NewReadFile(ws, FilesConfig{}), agent.RiskSafe},
		{NewListFiles(ws, FilesConfig{}), agent.RiskSafe},
		{NewWriteFile(ws, FilesConfig{}), agent.RiskCautious},
		{NewReadFile(ws, FilesConfig{Risk: agent.RiskConfirm}), agent.RiskConfirm},
		// Config only raises: a lower configured level leaves the tool's own.
		{NewWriteFile(ws, FilesConfig{Risk: agent.RiskSafe}), agent.RiskCautious},
	}
	for _, tt := range tests {
		if got := tt.tool.Assess(json.RawMessage(`{"path":"x"}`)).Risk; got != tt.want {
			t.Errorf("%s: risk %s, want %s", tt.tool.Info().Spec.Name, got, tt.want)
		}
	}
}

func FuzzWorkspacePath(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", "/etc/passwd", "out/secret.txt", "chain1", "sub/../../outside", "./", "a//b/../..", "rel-secret", "\x00"} {
		f.Add(s)
	}
	ws, _ := escapeFixture(f)
	read := NewReadFile(ws, FilesConfig{})
	list := NewListFiles(ws, FilesConfig{})
	f.Fuzz(func(t *testing.T, p string) {
		if clean, err := workspacePath(p); err == nil {
			if strings.HasPrefix(clean, "/") || clean == ".." || strings.HasPrefix(clean, "../") {
				t.Fatalf("workspacePath(%q) = %q escapes", p, clean)
			}
		}
		args, _ := json.Marshal(map[string]any{"path": p, "recursive": true})
		inv := agent.Invocation{RunID: "r1", Args: args}
		if out, _ := read.Call(context.Background(), inv); strings.Contains(out, secret) {
			t.Fatalf("read_file %q revealed the secret", p)
		}
		if out, _ := list.Call(context.Background(), inv); strings.Contains(out, "secret.txt  ") {
			t.Fatalf("list_files %q listed outside:\n%s", p, out)
		}
	})
}

// within fails the test when f does not return in time: the guards tested with it keep a
// tool from blocking forever, so without them the call never returns.
func within[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not return", what)
		var zero T
		return zero
	}
}

func TestFilesRefuseSpecialFiles(t *testing.T) {
	ws, dir := escapeFixture(t)
	read := NewReadFile(ws, FilesConfig{})
	write := NewWriteFile(ws, FilesConfig{})
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A FIFO with a reader: a write-only open of it succeeds, so only the type check stops
	// write_file from writing into the reader.
	if err := syscall.Mkfifo(filepath.Join(dir, "read-fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	reader, err := os.OpenFile(filepath.Join(dir, "read-fifo"), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("fifo", filepath.Join(dir, "fifo-link")))

	tests := []struct {
		tool agent.Tool
		path string
		want string
	}{
		{read, "fifo", "named pipe"},
		{read, "fifo-link", "named pipe"},
		{read, "read-fifo", "named pipe"},
		{read, "sock", "socket"},
		{read, "sub", "is a directory"},
		{write, "fifo", "named pipe"},
		{write, "read-fifo", "named pipe"},
		{write, "sock", "socket"},
		{write, "sub", "is a directory"},
	}
	for _, tt := range tests {
		name := tt.tool.Info().Spec.Name + " " + tt.path
		err := within(t, name, func() error {
			_, err := call(t, tt.tool, "r1", map[string]any{"path": tt.path, "content": "x"})
			return err
		})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to say %q", name, err, tt.want)
		}
	}
	if n, _ := reader.Read(make([]byte, 8)); n != 0 {
		t.Errorf("write_file wrote %d bytes into a FIFO's reader", n)
	}
}

// TestWriteFileIntoGitAsks holds the .git rule: git commands are rated as reads, so a write
// that could give git a program to run (core.fsmonitor, diff.external, a hook) needs approval.
func TestWriteFileIntoGitAsks(t *testing.T) {
	w := &WriteFile{}
	tests := []struct {
		path string
		want agent.Risk
	}{
		{"notes.md", agent.RiskCautious},
		{"src/git.go", agent.RiskCautious},
		{".gitignore", agent.RiskCautious},
		{".git/config", agent.RiskConfirm},
		{"./.git/hooks/pre-commit", agent.RiskConfirm},
		{"vendor/lib/.git/config", agent.RiskConfirm},
		{".GIT/config", agent.RiskConfirm},
		{`.git\config`, agent.RiskConfirm},
	}
	for _, tt := range tests {
		args, _ := json.Marshal(map[string]string{"path": tt.path, "content": "[core]\n\tfsmonitor = ./x.sh\n"})
		if got := w.assess(args).Risk; got != tt.want {
			t.Errorf("write_file %q: risk %s, want %s", tt.path, got, tt.want)
		}
	}
}
