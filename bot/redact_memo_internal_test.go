package bot

import (
	"fmt"
	"strings"
	"testing"
)

// TestRedactMemoGivesWhatRedactGives checks that a text redacted through the memo, the first
// time and again from it, is what Redact makes of it, secret or not; that a long text is not
// kept; and that the memo stays within memoTexts.
func TestRedactMemoGivesWhatRedactGives(t *testing.T) {
	r := NewRedactor([]string{"configured-secret-value-42"})
	texts := []string{
		"Cancel",
		"path: a.go\ntoken: ghp_R7kQ2mN9pL4vT8wZ3yBx5cV1dF6gH0jK2lM4",
		"aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
		"uses configured-secret-value-42 twice: configured-secret-value-42",
		"n: 0",
	}
	for _, s := range texts {
		want := r.Redact(s)
		for pass := range 2 {
			if got := r.redactMemoized(s); got != want {
				t.Errorf("pass %d: redactMemoized(%q) = %q, want %q", pass, s, got, want)
			}
		}
	}
	long := strings.Repeat("x", memoTextLen+1)
	r.redactMemoized(long)
	if _, kept := r.memo.m[long]; kept {
		t.Error("a text longer than memoTextLen was kept")
	}
	for i := range 3 * memoTexts {
		r.redactMemoized(fmt.Sprintf("step %d", i))
	}
	if n := len(r.memo.m); n > memoTexts {
		t.Errorf("the memo holds %d texts, want at most %d", n, memoTexts)
	}
}
