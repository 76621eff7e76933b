package web

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// TestFileView serves the files a run wrote, read-only, to those who may see its thread,
// and refuses everything else as "no such file": a path no message lists, a path out of the
// workspace, a symlink out of it (or inside it), another person's thread, and a console
// with no workspaces.
func TestFileView(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "run-1")
	other := filepath.Join(root, "run-2")
	for _, d := range []string{filepath.Join(ws, "docs"), other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(ws, "report.md"), "# Report\n<script>alert(1)</script>\n")
	write(filepath.Join(ws, "docs", "a b.md"), "spaced")
	write(filepath.Join(ws, "unlisted.md"), "not in any message")
	write(filepath.Join(other, "secret.txt"), "run-2's file")
	write(filepath.Join(root, "outside.txt"), "outside every workspace")
	for link, target := range map[string]string{
		"passwd":  "/etc/passwd",
		"escape":  "../run-2/secret.txt",
		"inside":  "report.md",
		"dirlink": "docs",
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	workspaces := WithWorkspaces(func(run string) string { return filepath.Join(root, run) })
	users := map[string]string{"ann": annToken, "bob": bobToken}
	a, srv, _ := newServer(t, Config{Users: users}, workspaces)
	_, v := post(t, srv, "/api/threads", goal(uuid1, "", "write a report"), as(annToken)...)
	id := v["thread"].(string)
	listed := []string{"report.md", "docs/a b.md", "passwd", "escape", "inside", "dirlink/a b.md", "../outside.txt", "docs", "missing.md"}
	if _, err := a.Post(context.Background(), threadRef(id), bot.Message{Kind: bot.KindAnswer, Text: "Done.", Files: listed, Workspace: "run-1"}); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name, path, tok string
		want            int
		body            string
	}{
		{"a listed file", "/files/run-1/report.md", annToken, 200, "# Report\n<script>alert(1)</script>\n"},
		{"an escaped path", "/files/run-1/docs/a%20b.md", annToken, 200, "spaced"},
		{"another person's thread", "/files/run-1/report.md", bobToken, 404, ""},
		{"a file no message lists", "/files/run-1/unlisted.md", annToken, 404, ""},
		{"a listed path of another run", "/files/run-2/report.md", annToken, 404, ""},
		{"traversal", "/files/run-1/..%2foutside.txt", annToken, 404, ""},
		{"traversal, encoded dots", "/files/run-1/%2e%2e/outside.txt", annToken, 404, ""},
		{"a symlink out of the system", "/files/run-1/passwd", annToken, 404, ""},
		{"a symlink to another run", "/files/run-1/escape", annToken, 404, ""},
		{"a symlink inside the workspace", "/files/run-1/inside", annToken, 404, ""},
		{"through a symlinked directory", "/files/run-1/dirlink/a%20b.md", annToken, 404, ""},
		{"a directory", "/files/run-1/docs", annToken, 404, ""},
		{"a listed file that is missing", "/files/run-1/missing.md", annToken, 404, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, v := get(t, srv, tt.path, as(tt.tok)...)
			if res.StatusCode != tt.want {
				t.Fatalf("GET %s: %s, want %d (%v)", tt.path, res.Status, tt.want, v)
			}
			if tt.want != 200 {
				return
			}
			if got := v["body"]; got != tt.body {
				t.Errorf("body %q, want %q", got, tt.body)
			}
			// Shown as text, with no rights of the console's.
			if ct := res.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") {
				t.Errorf("Content-Security-Policy %q, want a sandbox", csp)
			}
		})
	}

	// Without a sign-in, nothing.
	if res, _ := get(t, srv, "/files/run-1/report.md"); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET without a token: %s, want 401", res.Status)
	}
	// A console given no workspaces serves no file.
	b, bsrv, _ := newServer(t, Config{Users: users})
	_, v = post(t, bsrv, "/api/threads", goal(uuid1, "", "write a report"), as(annToken)...)
	b.Post(context.Background(), threadRef(v["thread"].(string)), bot.Message{Kind: bot.KindAnswer, Files: []string{"report.md"}, Workspace: "run-1"})
	if res, _ := get(t, bsrv, "/files/run-1/report.md", as(annToken)...); res.StatusCode != http.StatusNotFound {
		t.Errorf("a console without workspaces: %s, want 404", res.Status)
	}
}

func TestCleanFilePath(t *testing.T) {
	for p, want := range map[string]bool{
		"report.md": true, "docs/a.md": true, ".hidden": true,
		"": false, ".": false, "..": false, "../x": false, "/etc/passwd": false, "a/../b": false,
		"a//b": false, "a/": false, "./a": false, "a\x00b": false, `a\..\b`: false,
	} {
		if got := cleanFilePath(p); got != want {
			t.Errorf("cleanFilePath(%q) = %v, want %v", p, got, want)
		}
	}
}
