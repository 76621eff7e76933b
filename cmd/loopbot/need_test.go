package main

import (
	"os"
	"os/exec"
	"testing"
)

// debianPackage names the Debian package of each program a test may need.
var debianPackage = map[string]string{"bwrap": "bubblewrap", "prlimit": "util-linux", "chromium": "chromium"}

// lookOrSkip returns the path of a program a test needs. Missing, it skips the test naming
// what to install, except under CI, where a missing program fails the test instead.
func lookOrSkip(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	pkg := debianPackage[name]
	if pkg == "" {
		pkg = name
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed, and CI is set: install it (Debian: apt-get install -y %s)", name, pkg)
	}
	t.Skipf("%s is not installed; install it (Debian: apt-get install -y %s) to run this test", name, pkg)
	return ""
}
