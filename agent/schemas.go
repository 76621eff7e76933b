package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// A tool's parameter schema is compiled when a run first needs it, not in New: compiling
// the daemon's dozen schemas was the largest allocation of its start (about 290 KB, most of
// it garbage that stays resident while nothing else allocates), and a daemon that sits idle
// never needs them. A bad schema is still reported before a model can call the tool: every
// run checks them all before its first model call and fails at once, naming the tool, if one
// does not compile (CheckSchemas). The built-in tools' schemas are compiled by a test of the
// daemon, and an MCP server's are checked where its tools are listed.

// argsSchema checks a call's arguments against its tool's parameter schema.
type argsSchema interface {
	validate(args map[string]any) error
	// check compiles the schema, if that is not done yet, and says whether it compiles.
	check() error
}

// toolSchema is a tool's parameter schema, compiled on first use, once.
type toolSchema struct {
	compiled func() (*schema, error)
}

func newToolSchema(raw json.RawMessage) *toolSchema {
	return &toolSchema{compiled: sync.OnceValues(func() (*schema, error) { return compileSchema(raw) })}
}

func (l *toolSchema) check() error {
	_, err := l.compiled()
	return err
}

func (l *toolSchema) validate(args map[string]any) error {
	s, err := l.compiled()
	if err != nil {
		return err
	}
	return s.validate(args)
}

// check is nil for a schema compiled already.
func (s *schema) check() error { return nil }

// checkSchemaText is what New checks at once, with no allocation: that a tool's parameters
// are one JSON object, or absent.
func checkSchemaText(raw json.RawMessage) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] != '{' || !json.Valid(trimmed) {
		return errors.New("parameter schema: not a JSON object")
	}
	return nil
}

// CheckSchemas compiles the parameter schema of every tool of the agent, control tools
// included, and returns an error naming the first that does not compile. Run does the same
// before a run's first model call; a caller may call it to find a bad schema before any run.
func (a *Agent) CheckSchemas() error {
	for _, spec := range a.specs {
		if err := a.tools[spec.Name].schema.check(); err != nil {
			return fmt.Errorf("tool %s: %w", spec.Name, err)
		}
	}
	return nil
}
