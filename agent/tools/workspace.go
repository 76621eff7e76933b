package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Workspaces hands out the directory of each run under one root, and bounds what each holds.
type Workspaces struct {
	root   string
	limits LimitsConfig
}

// NewWorkspaces returns the workspaces under root, which is made absolute so that the shell
// sandbox can bind it. The workspace limits of limits bound each run's workspace.
func NewWorkspaces(root string, limits LimitsConfig) (*Workspaces, error) {
	if strings.TrimSpace(root) == "" {
		return nil, errors.New("workspace root is empty")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	return &Workspaces{root: abs, limits: limits}, nil
}

// Path returns the run's workspace directory without creating it: where a view of the
// files a run wrote looks for them.
func (w *Workspaces) Path(runID string) string {
	return filepath.Join(w.root, SanitizeRunID(runID))
}

// Dir returns the run's workspace, creating it (and the root) when missing.
func (w *Workspaces) Dir(runID string) (string, error) {
	dir := w.Path(runID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create workspace: %w", err)
	}
	return dir, nil
}

// SanitizeRunID turns a run ID into one safe directory name. IDs made only of letters,
// digits, '-', '_' and '.' (and not only dots) are kept as they are; any other ID has its
// other characters replaced and a hash of the original appended, so that two different IDs
// never share a workspace.
func SanitizeRunID(id string) string {
	const maxLen = 64
	clean := true
	var b strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
			clean = false
		}
	}
	s := b.String()
	if strings.Trim(s, ".") == "" || len(s) > maxLen {
		clean = false
	}
	if clean {
		return s
	}
	sum := sha256.Sum256([]byte(id))
	s = strings.TrimLeft(s, ".")
	if s == "" {
		s = "run"
	}
	if len(s) > maxLen-17 {
		s = s[:maxLen-17]
	}
	return s + "-" + hex.EncodeToString(sum[:8])
}
