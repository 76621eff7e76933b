package main

import (
	"testing"

	"github.com/loopbot/loopbot/internal/lazyre"
)

// TestRegexpsCompile compiles the package's regular expressions, which production compiles
// on first use (internal/lazyre): a bad pattern fails here, not on the first text that
// needs it.
func TestRegexpsCompile(t *testing.T) {
	if err := lazyre.Check(escapeSeq, secretName); err != nil {
		t.Error(err)
	}
}
