package main

import (
	"fmt"
	"io"
	"os/exec"
	"path/filepath"

	"github.com/loopbot/loopbot/agent/tools"
)

// shellProblems says what the shell tool lacks on this machine to run: bubblewrap, which
// sandboxes each command, and prlimit (util-linux), which sets its resource limits. Without
// them the tool is still listed to the model but refuses every command, so check says so
// before a run finds out.
func shellProblems(c tools.ShellConfig) []string {
	if !c.Enabled {
		return nil
	}
	var problems []string
	bin := c.Bwrap
	if bin == "" {
		bin = "bwrap"
	}
	if _, err := exec.LookPath(bin); err != nil {
		if c.AllowUnsandboxed {
			problems = append(problems, fmt.Sprintf("bubblewrap (%s) is not found: the shell tool runs commands WITHOUT a sandbox (tools.shell.allow_unsandboxed = true); install it: apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora)", filepath.Base(bin)))
		} else {
			problems = append(problems, fmt.Sprintf("bubblewrap (%s) is not found: the shell tool will refuse to run every command; install it: apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora), or turn the tool off with [tools.shell] enabled = false", filepath.Base(bin)))
		}
	}
	if _, err := exec.LookPath("prlimit"); err != nil {
		problems = append(problems, "prlimit is not found: the shell tool will refuse to run every command, since it sets each command's resource limits with it; install util-linux: apt-get install util-linux (Debian/Ubuntu)")
	}
	return problems
}

// writeShellWarnings prints the shell tool's problems, one warning a line.
func writeShellWarnings(w io.Writer, problems []string) {
	for _, p := range problems {
		fmt.Fprintf(w, "WARNING: shell: %s\n", p)
	}
}
