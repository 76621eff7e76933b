package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckListsPlaybooks: check lists the playbooks of [bot.playbooks] dir and fails on an
// invalid one, naming its file and line; a playbook may name the remember tool.
func TestCheckListsPlaybooks(t *testing.T) {
	dir := t.TempDir()
	good := "---\nname: notes\ndescription: Keep what we learn\ntools: [remember]\n---\nRemember what matters.\n"
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf("[bot.playbooks]\ndir = %q\n", dir))
	out, err := checkOutput(t, nil, "-config", cfg)
	if err != nil || !strings.Contains(out, "• notes: Keep what we learn · tools: remember") {
		t.Fatalf("check: %v\n%s", err, out)
	}
	bad := "---\nname: bad\ndescription: d\nsteps:\n  - use {{nothing}}\n---\n"
	if err := os.WriteFile(filepath.Join(dir, "bad.md"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = checkOutput(t, nil, "-config", cfg)
	if err == nil || !strings.Contains(out, "Not a valid playbook: bad.md:5: step 1 uses {{nothing}}") {
		t.Fatalf("check with an invalid playbook: %v\n%s", err, out)
	}
}
