package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/loopbot/loopbot/agent"
)

// Set is the tools built from a Config: the built-in ones that are enabled and those of the
// MCP servers. Close it to stop the MCP servers.
type Set struct {
	builtin []agent.Tool
	sources map[string]string
	mcp     *Manager
	ws      *Workspaces
}

// Listing is one tool as `loopbot check` shows it.
type Listing struct {
	Name        string
	Description string
	// BaseRisk is the tool's own level for a typical call; Risk is the level in force once
	// config has had its say. Tools such as shell judge each call, so a call may be rated
	// higher than this.
	BaseRisk agent.Risk
	Risk     agent.Risk
	// Source is "builtin" or "mcp:<server>".
	Source string
}

// Build validates cfg, builds the enabled tools and starts the MCP servers, waiting for
// each one's first connection attempt. A server that cannot start is logged and retried; it
// never fails Build. opts configure the MCP servers' manager.
func Build(ctx context.Context, cfg Config, logger *slog.Logger, opts ...MCPOption) (*Set, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("tools config: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Set{sources: map[string]string{}}
	var ws *Workspaces
	if cfg.Shell.Enabled || cfg.Files.Enabled {
		var err error
		if ws, err = NewWorkspaces(cfg.Workspace, cfg.Limits); err != nil {
			return nil, fmt.Errorf("tools config: %w", err)
		}
		s.ws = ws
	}
	if cfg.HTTPFetch.Enabled {
		f, err := NewHTTPFetch(cfg.HTTPFetch)
		if err != nil {
			return nil, fmt.Errorf("tools config: %w", err)
		}
		s.builtin = append(s.builtin, f)
	}
	if cfg.Shell.Enabled {
		sh := NewShell(ws, cfg.Shell, cfg.Limits)
		if sh.groups.note != "" {
			logger.Warn("shell sandbox: the process limit is weak", "why", sh.groups.note)
		}
		s.builtin = append(s.builtin, sh)
	}
	if cfg.Files.Enabled {
		s.builtin = append(s.builtin, NewReadFile(ws, cfg.Files), NewWriteFile(ws, cfg.Files), NewListFiles(ws, cfg.Files))
	}
	for _, t := range s.builtin {
		s.sources[t.Info().Spec.Name] = "builtin"
	}
	if len(cfg.MCP.Servers) > 0 {
		s.mcp = NewManager(cfg.MCP, logger, opts...)
		s.mcp.Start(ctx)
	}
	return s, nil
}

// Tools returns the tools for agent.New: the built-in ones, then those of the MCP servers
// known so far. A server that comes up later adds its tools to later calls.
func (s *Set) Tools() []agent.Tool {
	out := append([]agent.Tool(nil), s.builtin...)
	if s.mcp != nil {
		out = append(out, s.mcp.Tools()...)
	}
	return out
}

// MCP returns the manager of the MCP servers, or nil when none is configured.
func (s *Set) MCP() *Manager { return s.mcp }

// typicalCall is what List assesses each built-in tool with: its most ordinary use.
func typicalCall(tool string) string {
	switch tool {
	case "http_fetch":
		return `{"url":"https://example.com/"}`
	case "shell":
		return `{"command":"ls"}`
	case "read_file":
		return `{"path":"a.txt"}`
	case "write_file":
		return `{"path":"a.txt","content":""}`
	}
	return `{}`
}

// ownAssessor is a built-in tool's assessment before config raises it.
type ownAssessor interface {
	assess(args json.RawMessage) agent.Assessment
}

// List describes the tools the model will see, with their risk.
func (s *Set) List() []Listing {
	var out []Listing
	for _, t := range s.Tools() {
		info := t.Info()
		name := info.Spec.Name
		args := json.RawMessage(typicalCall(name))
		l := Listing{Name: name, Description: info.Spec.Description, Source: s.sources[name]}
		l.Risk = t.Assess(args).Risk
		l.BaseRisk = l.Risk
		switch t := t.(type) {
		case *MCPTool:
			// An MCP tool has no level of its own; config sets it, confirm by default.
			l.Source = "mcp:" + t.srv.cfg.Name
			l.BaseRisk = agent.RiskConfirm
		case ownAssessor:
			l.BaseRisk = t.assess(args).Risk
		}
		out = append(out, l)
	}
	return out
}

// Close stops the MCP servers.
func (s *Set) Close() error {
	if s.mcp != nil {
		return s.mcp.Close()
	}
	return nil
}

// Workspaces returns the runs' workspaces, or nil when no tool of the set has one.
func (s *Set) Workspaces() *Workspaces { return s.ws }
