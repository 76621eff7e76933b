package bot

import "testing"

// TestAllowlists checks gitleaks's allowlists as the redactor keeps them: a stop word in the
// secret, a regex on the secret, on the match or on its line, and an AND of checks.
func TestAllowlists(t *testing.T) {
	rs, err := rules()
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*rule{}
	for _, r := range rs {
		byID[r.id] = r
	}
	tests := []struct {
		name, rule, text, secret string
		want                     bool
	}{
		{"a stop word in the secret", "generic-api-key", `api_key = "x9Kq2PluploadZ7w"`, "x9Kq2PluploadZ7w", true},
		{"the same secret without it", "generic-api-key", `api_key = "x9Kq2PxWvYtZ7wQa"`, "x9Kq2PxWvYtZ7wQa", false},
		{"a regex on the secret", "aws-access-token", "key AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE", true},
		{"a template variable", "generic-api-key", `token = "${API_TOKEN}"`, "${API_TOKEN}", true},
		{"a regex on the line", "generic-api-key", "RUN --mount=type=secret,id=tok9Kq2PxWvY cat", "tok9Kq2PxWvY", true},
		{"an AND that needs a path", "generic-api-key", `LICENSE_x = "Kq2PxWvYtZ7wQa"`, "Kq2PxWvYtZ7wQa", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := byID[tt.rule]
			if r == nil {
				t.Fatalf("no rule %s", tt.rule)
			}
			start := indexOf(t, tt.text, tt.secret)
			if got := r.allowed(tt.text, tt.secret, start, start+len(tt.secret)); got != tt.want {
				t.Errorf("allowed(%q) = %v, want %v", tt.secret, got, tt.want)
			}
		})
	}
}

func indexOf(t *testing.T, text, s string) int {
	t.Helper()
	for i := 0; i+len(s) <= len(text); i++ {
		if text[i:i+len(s)] == s {
			return i
		}
	}
	t.Fatalf("%q not in %q", s, text)
	return 0
}
