package tools

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/internal/lazyre"
)

// durationOr is d, or def when d is zero.
func durationOr(d agent.Duration, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return time.Duration(d)
}

// Config is the [tools] section of the config file, which embeds it as it is. The zero value
// of a field means its default; a tool is offered only when enabled.
type Config struct {
	// Workspace is the directory under which every run gets its own workspace.
	Workspace string          `toml:"workspace"`
	HTTPFetch HTTPFetchConfig `toml:"http_fetch"`
	Shell     ShellConfig     `toml:"shell"`
	Files     FilesConfig     `toml:"files"`
	// MCP is the file's [mcp] section, a section of its own beside [tools] rather than
	// [tools.mcp], so the command decodes it there and sets it here.
	MCP MCPConfig `toml:"-"`
	// Limits bounds what a shell command may use and what a run's workspace may hold.
	Limits LimitsConfig `toml:"limits"`
}

// DefaultConfig is the configuration with nothing set in the file: the built-in tools on,
// with run workspaces under ./loopbot-workspaces.
func DefaultConfig() Config {
	return Config{
		Workspace: "loopbot-workspaces",
		HTTPFetch: HTTPFetchConfig{Enabled: true},
		Shell:     ShellConfig{Enabled: true},
		Files:     FilesConfig{Enabled: true},
	}
}

// HTTPFetchConfig configures http_fetch.
type HTTPFetchConfig struct {
	Enabled bool `toml:"enabled"`
	// Risk raises the risk of every call to at least this level.
	Risk agent.Risk `toml:"risk"`
	// Methods other than GET and HEAD the model may use, such as POST. Any of them needs
	// approval.
	Methods []string `toml:"methods"`
	// Allow names the internal destinations that may be reached anyway: CIDRs ("10.1.0.0/16"),
	// addresses ("192.168.1.5"), address:port pairs ("127.0.0.1:8080"), host names
	// ("wiki.internal") and host:port pairs.
	Allow []string `toml:"allow"`
	// MaxBytes caps the body read from a response (default 1 MiB).
	MaxBytes int64 `toml:"max_bytes"`
	// Timeout bounds one fetch, redirects included (default 30s).
	Timeout agent.Duration `toml:"timeout"`
	// MaxRedirects is how many redirects are followed (default 5).
	MaxRedirects int    `toml:"max_redirects"`
	UserAgent    string `toml:"user_agent"`
}

// ShellConfig configures shell.
type ShellConfig struct {
	Enabled bool       `toml:"enabled"`
	Risk    agent.Risk `toml:"risk"`
	// Bwrap is the bubblewrap binary, looked up in PATH when not absolute (default "bwrap").
	Bwrap string `toml:"bwrap"`
	// AllowUnsandboxed runs commands without bubblewrap when it is missing. Without it, the
	// tool refuses to run.
	AllowUnsandboxed bool `toml:"allow_unsandboxed"`
	// AllowNetwork shares the host's network with the sandbox.
	AllowNetwork bool `toml:"allow_network"`
	// SafeReadonly lets commands made only of read-only programs (ls, cat, grep ...) run
	// without asking; otherwise they are cautious.
	SafeReadonly bool `toml:"safe_readonly"`
	// Timeout bounds one command (default 60s).
	Timeout agent.Duration `toml:"timeout"`
	// MaxOutput caps what is kept of stdout and of stderr each (default 64 KiB).
	MaxOutput int `toml:"max_output"`
	// ReadOnlyPaths are extra host paths mounted read-only at the same place in the sandbox.
	ReadOnlyPaths []string `toml:"read_only_paths"`
}

// FilesConfig configures read_file, write_file and list_files.
type FilesConfig struct {
	Enabled bool       `toml:"enabled"`
	Risk    agent.Risk `toml:"risk"`
	// MaxReadBytes caps what read_file returns (default 256 KiB).
	MaxReadBytes int64 `toml:"max_read_bytes"`
	// MaxWriteBytes caps what write_file accepts (default 1 MiB).
	MaxWriteBytes int `toml:"max_write_bytes"`
	// MaxEntries caps what list_files returns (default 1000).
	MaxEntries int `toml:"max_entries"`
}

// MCPConfig lists the MCP servers whose tools the model may use.
type MCPConfig struct {
	Servers []MCPServerConfig `toml:"servers"`
	// MinBackoff and MaxBackoff bound the wait before restarting a server that failed or died
	// (defaults 1s and 5m); the wait doubles after every failure in a row.
	MinBackoff agent.Duration `toml:"min_backoff"`
	MaxBackoff agent.Duration `toml:"max_backoff"`
	// StartTimeout bounds the first connection to each server at Start (default 30s).
	StartTimeout agent.Duration `toml:"start_timeout"`
}

// MCPServerConfig is one [[mcp.servers]] entry: a command spoken to over stdio, or a URL
// spoken to over streamable HTTP.
type MCPServerConfig struct {
	// Name prefixes the server's tools: <name>__<tool>.
	Name     string            `toml:"name"`
	Disabled bool              `toml:"disabled"`
	Command  string            `toml:"command"`
	Args     []string          `toml:"args"`
	Env      map[string]string `toml:"env"`
	URL      string            `toml:"url"`
	Headers  map[string]string `toml:"headers"`
	// Risk is the level of the server's tools (default confirm).
	Risk agent.Risk `toml:"risk"`
	// ToolRisk sets the level of single tools, by the server's own tool name.
	ToolRisk map[string]agent.Risk `toml:"tool_risk"`
	// Allow, when not empty, names the only tools offered; Deny names tools never offered.
	Allow []string `toml:"allow"`
	Deny  []string `toml:"deny"`
	// Timeout bounds one tool call (default 2m).
	Timeout agent.Duration `toml:"timeout"`
	// Trusted marks a server whose results are not outside content (one of your own that
	// reads nothing from outside): calling it does not expose the run to the data-flow guard.
	Trusted bool `toml:"trusted"`
	// ReadOnlyTools names the server's tools (as the server names them) that send nothing
	// anywhere; calls of the others need approval in an exposed run.
	ReadOnlyTools []string `toml:"read_only_tools"`
}

var serverNameRE = lazyre.New(`^[A-Za-z0-9-]{1,32}$`)

// Validate reports every problem of the configuration at once, naming the key at fault.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	needsWorkspace := c.Shell.Enabled || c.Files.Enabled
	if needsWorkspace && strings.TrimSpace(c.Workspace) == "" {
		bad("tools.workspace: required when shell or files are enabled")
	}
	for _, r := range []struct {
		key  string
		risk agent.Risk
	}{{"tools.http_fetch.risk", c.HTTPFetch.Risk}, {"tools.shell.risk", c.Shell.Risk}, {"tools.files.risk", c.Files.Risk}} {
		if r.risk != 0 && (r.risk < agent.RiskSafe || r.risk > agent.RiskDangerous) {
			bad("%s: invalid level %d", r.key, int(r.risk))
		}
	}
	for _, m := range c.HTTPFetch.Methods {
		if m != strings.ToUpper(m) || !validMethod(m) {
			bad("tools.http_fetch.methods: %q is not an HTTP method (write it in capitals, like POST)", m)
		}
	}
	if _, err := parseAllowlist(c.HTTPFetch.Allow); err != nil {
		bad("tools.http_fetch.allow: %w", err)
	}
	if c.HTTPFetch.MaxBytes < 0 || c.HTTPFetch.MaxRedirects < 0 {
		bad("tools.http_fetch: max_bytes and max_redirects must not be negative")
	}
	if c.Shell.MaxOutput < 0 {
		bad("tools.shell.max_output: must not be negative")
	}
	for _, p := range c.Shell.ReadOnlyPaths {
		if !strings.HasPrefix(p, "/") {
			bad("tools.shell.read_only_paths: %q is not an absolute path", p)
		}
	}
	if c.Files.MaxReadBytes < 0 || c.Files.MaxWriteBytes < 0 || c.Files.MaxEntries < 0 {
		bad("tools.files: size caps must not be negative")
	}
	errs = append(errs, c.Limits.validate()...)
	if c.MCP.MinBackoff > 0 && c.MCP.MaxBackoff > 0 && c.MCP.MaxBackoff < c.MCP.MinBackoff {
		bad("mcp.max_backoff: %s is shorter than min_backoff %s", time.Duration(c.MCP.MaxBackoff), time.Duration(c.MCP.MinBackoff))
	}
	seen := map[string]bool{}
	for i, s := range c.MCP.Servers {
		key := fmt.Sprintf("mcp.servers[%d]", i)
		if s.Name != "" {
			key = fmt.Sprintf("mcp.servers %q", s.Name)
		}
		switch {
		case !serverNameRE.MatchString(s.Name):
			bad("%s: name must be 1 to 32 letters, digits or hyphens", key)
		case seen[s.Name]:
			bad("%s: two servers have this name", key)
		}
		seen[s.Name] = true
		switch {
		case s.Command == "" && s.URL == "":
			bad("%s: set command (stdio) or url (streamable HTTP)", key)
		case s.Command != "" && s.URL != "":
			bad("%s: set command or url, not both", key)
		case s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://"):
			bad("%s: url %q must start with http:// or https://", key, s.URL)
		}
		if s.Command == "" && (len(s.Args) > 0 || len(s.Env) > 0) {
			bad("%s: args and env need a command", key)
		}
		if s.URL == "" && len(s.Headers) > 0 {
			bad("%s: headers need a url", key)
		}
		for _, name := range s.Allow {
			for _, d := range s.Deny {
				if name == d {
					bad("%s: tool %q is both allowed and denied", key, name)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func validMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

// raise returns the higher of a tool's own assessment and a configured floor, saying so in
// the reason when the floor decided.
func raise(a agent.Assessment, floor agent.Risk) agent.Assessment {
	if floor > a.Risk {
		a.Reason = fmt.Sprintf("%s (configured risk %s)", a.Reason, floor)
		a.Risk = floor
	}
	return a
}
