package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// TestWriteFilePreview: replacing a file previews the diff; a new file, the same content, a
// binary or huge file, and a path through a symlink out of the workspace each say what
// they are, and nothing of a file outside the workspace is read.
func TestWriteFilePreview(t *testing.T) {
	ws, dir := escapeFixture(t)
	write := NewWriteFile(ws, FilesConfig{})
	if err := os.WriteFile(filepath.Join(dir, "bin"), []byte{0, 1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, maxDiffInput+1), 0o644); err != nil {
		t.Fatal(err)
	}
	preview := func(p, content string) (string, error) {
		raw, _ := json.Marshal(map[string]string{"path": p, "content": content})
		return write.Preview(context.Background(), agent.Invocation{RunID: "r1", CallID: "c1", Args: raw})
	}
	tests := []struct {
		name, path, content, want string
		fails                     bool
	}{
		{"replaces a file", "sub/hello.txt", "hello\nworld\n", "--- sub/hello.txt (now)\n+++ sub/hello.txt (after this call)\n@@ -1 +1,2 @@\n hello\n+world", false},
		{"a new file", "sub/new.txt", "x\n", "", false},
		{"the same content", "sub/hello.txt", "hello\n", "Leaves sub/hello.txt as it is: the content is the same.", false},
		{"binary", "bin", "x", "Replaces bin, a binary file of 3 bytes.", false},
		{"too large", "big", "x", "too large to compare here", false},
		{"a symlink out", "abs-secret", "x", "", true},
		{"through a symlinked directory", "out/secret.txt", "x", "", true},
		{"outside", "../outside/secret.txt", "x", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := preview(tt.path, tt.content)
			if (err != nil) != tt.fails || !strings.Contains(got, tt.want) || tt.want == "" && got != "" {
				t.Errorf("Preview(%q) = %q, %v; want %q (fails %v)", tt.path, got, err, tt.want, tt.fails)
			}
			if strings.Contains(got, secret) || err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("the preview read a file outside the workspace: %q, %v", got, err)
			}
		})
	}
	// Previewing changes nothing.
	if b, _ := os.ReadFile(filepath.Join(dir, "sub", "hello.txt")); string(b) != "hello\n" {
		t.Errorf("the file became %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub", "new.txt")); !os.IsNotExist(err) {
		t.Errorf("previewing a new file created it: %v", err)
	}
}
