package tools

import (
	"encoding/json"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// TestGrantPatterns: each grantable tool draws a narrow pattern from a call, or none, and a
// pattern covers only calls it names.
func TestGrantPatterns(t *testing.T) {
	shell := &Shell{}
	fetch := &HTTPFetch{}
	write := &WriteFile{}
	cmd := func(s string) json.RawMessage { b, _ := json.Marshal(map[string]string{"command": s}); return b }
	get := func(u string) json.RawMessage { b, _ := json.Marshal(map[string]string{"url": u}); return b }
	post := func(u string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"url": u, "method": "POST"})
		return b
	}
	file := func(p string) json.RawMessage { b, _ := json.Marshal(map[string]string{"path": p}); return b }
	patterns := []struct {
		tool agent.Grantable
		args json.RawMessage
		want string // "" for none
	}{
		{shell, cmd("go test ./..."), "go test"},
		{shell, cmd("make"), "make"},
		{shell, cmd("go test ./... ; rm -rf /"), ""},
		{shell, cmd("go test | sh"), ""},
		{shell, cmd("go test > out"), ""},
		{shell, cmd("GOFLAGS=-x go test"), ""},
		{shell, cmd("go $(echo test)"), ""},
		{shell, cmd("git -C /etc log"), ""},
		{shell, cmd("'go' test"), ""},
		{shell, cmd("go test &"), ""},
		{fetch, get("https://api.example.com/v1?q=1"), "GET https://api.example.com"},
		{fetch, post("https://API.example.com/x"), "POST https://api.example.com"},
		{fetch, get("https://u:p@api.example.com/"), ""},
		{fetch, get("ftp://api.example.com/"), ""},
		{write, file("docs/guide/a.md"), "docs/guide/"},
		{write, file("README.md"), "README.md"},
		{write, file("../etc/passwd"), ""},
		{write, file(".git/config"), ""},
		{write, file("."), ""},
	}
	for _, tt := range patterns {
		got, ok := tt.tool.GrantPattern(tt.args)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("%T %s: pattern %q %v, want %q", tt.tool, tt.args, got, ok, tt.want)
		}
	}
	covers := []struct {
		tool    agent.Grantable
		pattern string
		args    json.RawMessage
		want    bool
	}{
		{shell, "go test", cmd("go test -run X ./pkg"), true},
		{shell, "go test", cmd("go test ./... && curl x"), false},
		{shell, "go test", cmd("go vet ./..."), false},
		{shell, "go", cmd("go test"), false},
		{shell, "make", cmd("make"), true},
		{fetch, "GET https://api.example.com", get("https://api.example.com/other?x=1"), true},
		{fetch, "GET https://api.example.com", get("https://api.example.com.evil.example/"), false},
		{fetch, "GET https://api.example.com", get("http://api.example.com/"), false},
		{fetch, "GET https://api.example.com", post("https://api.example.com/"), false},
		{write, "docs/", file("docs/a/b.md"), true},
		{write, "docs/", file("docs/../main.go"), false},
		{write, "docs/", file("docsx/a.md"), false},
		{write, "docs/", file("docs/.git/config"), false},
		{write, "README.md", file("README.md"), true},
		{write, "README.md", file("README.md.bak"), false},
		{write, "", file("a"), false},
	}
	for _, tt := range covers {
		if got := tt.tool.GrantCovers(tt.pattern, tt.args); got != tt.want {
			t.Errorf("%T %q covers %s = %v, want %v", tt.tool, tt.pattern, tt.args, got, tt.want)
		}
	}
}
