package main

import (
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
)

// requiredInTheBinary are the libraries the project's rules name for their jobs: the binary
// reaches chat platforms, storage, the model and MCP servers through them, never through a
// hand-written replacement, however much smaller one would make it. A protocol client is
// where security fixes and the protocol's changes land; the project takes them from the
// people who maintain it.
var requiredInTheBinary = map[string]string{
	"github.com/slack-go/slack":                  "Slack's Web API client",
	"github.com/bwmarrin/discordgo":              "Discord's client",
	"go.etcd.io/bbolt":                           "the embedded store",
	"github.com/jackc/pgx/v5":                    "the PostgreSQL driver",
	"github.com/sashabaranov/go-openai":          "the model client",
	"github.com/modelcontextprotocol/go-sdk/mcp": "the official MCP SDK, through which MCP servers are reached",
}

// missingRequired returns one line for each required library that deps does not reach.
func missingRequired(deps []string) []string {
	var bad []string
	for lib, what := range requiredInTheBinary {
		if !slices.ContainsFunc(deps, func(d string) bool { return under(d, lib) }) {
			bad = append(bad, "cmd/loopbot does not link "+lib+" ("+what+"; the project's rules name it for the job)")
		}
	}
	slices.Sort(bad)
	return bad
}

func TestRequiredLibrariesAreLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=Deps", module+"/cmd/loopbot").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var p struct{ Deps []string }
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("decode go list output: %v", err)
	}
	if len(p.Deps) == 0 {
		t.Fatal("go list reported no dependencies; the check would prove nothing")
	}
	for _, v := range missingRequired(p.Deps) {
		t.Error(v)
	}
}

func TestMissingRequiredCatchesAGap(t *testing.T) {
	var all []string
	for lib := range requiredInTheBinary {
		all = append(all, lib+"/sub")
	}
	if got := missingRequired(all); len(got) > 0 {
		t.Errorf("every library linked, yet flagged: %q", got)
	}
	without := slices.DeleteFunc(slices.Clone(all), func(d string) bool { return d == "github.com/modelcontextprotocol/go-sdk/mcp/sub" })
	want := "cmd/loopbot does not link github.com/modelcontextprotocol/go-sdk/mcp (the official MCP SDK, through which MCP servers are reached; the project's rules name it for the job)"
	if got := missingRequired(without); !slices.Equal(got, []string{want}) {
		t.Errorf("missingRequired = %q, want [%q]", got, want)
	}
}
