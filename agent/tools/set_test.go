package tools

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/loopbot/loopbot/agent"
)

func TestConfigFromTOML(t *testing.T) {
	const file = `
workspace = "/srv/loopbot/ws"

[http_fetch]
enabled = true
allow = ["10.1.0.0/16", "wiki.internal"]
timeout = "10s"
methods = ["POST"]

[shell]
enabled = true
risk = "confirm"
safe_readonly = true

[files]
enabled = true

[[mcp.servers]]
name = "github"
command = "github-mcp"
args = ["stdio"]
env = { GITHUB_TOKEN = "x" }
risk = "cautious"
deny = ["delete_repo"]
tool_risk = { create_issue = "confirm" }

[[mcp.servers]]
name = "search"
url = "https://search.example/mcp"
headers = { Authorization = "Bearer y" }
`
	// The file's [mcp] is a section of its own, beside the tools' keys, as in loopbot's file.
	var doc struct {
		Config
		MCP MCPConfig `toml:"mcp"`
	}
	dec := toml.NewDecoder(strings.NewReader(file))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	cfg := doc.Config
	cfg.MCP = doc.MCP
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if time.Duration(cfg.HTTPFetch.Timeout) != 10*time.Second || cfg.Shell.Risk != agent.RiskConfirm ||
		cfg.MCP.Servers[0].ToolRisk["create_issue"] != agent.RiskConfirm || cfg.MCP.Servers[1].Headers["Authorization"] != "Bearer y" {
		t.Errorf("decoded %+v", cfg)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"shell without workspace", Config{Shell: ShellConfig{Enabled: true}}, "tools.workspace"},
		{"bad method", Config{HTTPFetch: HTTPFetchConfig{Methods: []string{"post"}}}, "tools.http_fetch.methods"},
		{"bad allow", Config{HTTPFetch: HTTPFetchConfig{Allow: []string{"a b"}}}, "tools.http_fetch.allow"},
		{"relative ro path", Config{Shell: ShellConfig{ReadOnlyPaths: []string{"opt"}}}, "read_only_paths"},
		{"backoff order", Config{MCP: MCPConfig{MinBackoff: agent.Duration(time.Minute), MaxBackoff: agent.Duration(time.Second)}}, "max_backoff"},
		{"server name", Config{MCP: MCPConfig{Servers: []MCPServerConfig{{Name: "a_b", Command: "x"}}}}, "name must be"},
		{"duplicate", Config{MCP: MCPConfig{Servers: []MCPServerConfig{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}}}}, "two servers"},
		{"neither", Config{MCP: MCPConfig{Servers: []MCPServerConfig{{Name: "a"}}}}, "set command"},
		{"both", Config{MCP: MCPConfig{Servers: []MCPServerConfig{{Name: "a", Command: "x", URL: "http://x"}}}}, "not both"},
		{"url scheme", Config{MCP: MCPConfig{Servers: []MCPServerConfig{{Name: "a", URL: "ftp://x"}}}}, "must start with http"},
		{"allow and deny", Config{MCP: MCPConfig{Servers: []MCPServerConfig{{Name: "a", Command: "x", Allow: []string{"t"}, Deny: []string{"t"}}}}}, "both allowed and denied"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want an error about %s", tt.name, err, tt.want)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("empty config: %v", err)
	}
}

func TestBuildAndList(t *testing.T) {
	sc := stdioServer("local")
	sc.Allow = []string{"echo"}
	cfg := Config{
		Workspace: filepath.Join(t.TempDir(), "ws"),
		HTTPFetch: HTTPFetchConfig{Enabled: true},
		Shell:     ShellConfig{Enabled: true, SafeReadonly: true, Risk: agent.RiskCautious},
		Files:     FilesConfig{Enabled: true, Risk: agent.RiskConfirm},
		MCP:       MCPConfig{Servers: []MCPServerConfig{sc}},
	}
	set, err := Build(t.Context(), cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })

	// Every tool must be acceptable to the loop, MCP schemas included.
	if _, err := agent.New(agent.Config{}, nopModel{}, set.Tools()); err != nil {
		t.Fatalf("agent.New refused the tools: %v", err)
	}
	var got []string
	for _, l := range set.List() {
		got = append(got, l.Name+" "+l.BaseRisk.String()+"/"+l.Risk.String()+" "+l.Source)
		if l.Description == "" {
			t.Errorf("%s has no description", l.Name)
		}
	}
	want := []string{
		"http_fetch safe/safe builtin",
		"shell safe/cautious builtin",
		"read_file safe/confirm builtin",
		"write_file cautious/confirm builtin",
		"list_files safe/confirm builtin",
		"local__echo confirm/confirm mcp:local",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("List() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if _, err := Build(t.Context(), Config{Shell: ShellConfig{Enabled: true}}, nil); err == nil {
		t.Error("Build accepted an invalid config")
	}
}

// nopModel lets agent.New check the tools; the test never runs the loop, so it is never
// consulted.
type nopModel struct{}

func (nopModel) Complete(context.Context, agent.Request) (agent.Reply, error) {
	return agent.Reply{}, errors.New("nopModel is not for running")
}

// TestDefaultConfig checks that the defaults loopbot starts from are valid and offer the
// built-in tools.
func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig does not validate: %v", err)
	}
	if !c.HTTPFetch.Enabled || !c.Shell.Enabled || !c.Files.Enabled || c.Workspace == "" {
		t.Errorf("DefaultConfig = %+v", c)
	}
}
