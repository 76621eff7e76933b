package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeFirstScreen keeps what a newcomer needs in the README's first screen: how to
// install the binary, the Go version go.mod asks for, and bubblewrap as a run-time
// dependency of the shell tool (not only of the tests); and further down, which of the two
// allowed_channels keys does what.
func TestReadmeFirstScreen(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	lines := strings.Split(string(readme), "\n")
	first := strings.Join(lines[:min(len(lines), 40)], "\n")
	for _, want := range []string{
		"go install github.com/loopbot/loopbot/cmd/loopbot@latest",
		"Go " + string(goLine[1]) + " or newer",
		"bubblewrap",
		"Without them loopbot still starts",
		"`loopbot check` prints a warning",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("the README's first 40 lines do not say %q", want)
		}
	}
	for _, want := range []string{"| `[slack] allowed_channels` | Slack only |", "| `[bot.policy] allowed_channels` | every platform"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("the README does not explain %q", want)
		}
	}
}
