package bot

import (
	"regexp"
	"testing"
)

// TestRulesCompile compiles every rule's pattern, gitleaks's (as loopbot rewrites their ends)
// and the local ones: rules are compiled on first use in production, where a bad pattern
// would only show when its keyword first appears.
func TestRulesCompile(t *testing.T) {
	rs, err := rules()
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) < 200 {
		t.Fatalf("%d rules loaded, want gitleaks's default set and the local ones", len(rs))
	}
	for _, r := range rs {
		if _, err := regexp.Compile(r.pattern); err != nil {
			t.Errorf("rule %s: %v", r.id, err)
		}
	}
}
