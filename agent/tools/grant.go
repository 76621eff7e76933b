package tools

import (
	"encoding/json"
	"net/url"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/internal/lazyre"
)

// The argument patterns of channel grants ("Always allow here", agent/grant.go). Each is drawn
// from the call a person approved and covers a later call only when the same function draws
// the same pattern from it (or, for files, a path under the same directory): a pattern never
// covers anything its words on the card do not say.

var (
	_ agent.Grantable = (*Shell)(nil)
	_ agent.Grantable = (*HTTPFetch)(nil)
	_ agent.Grantable = (*WriteFile)(nil)
)

// plainWord is a word a pattern may hold: a program name, a subcommand or a path, with no
// character the shell would treat specially.
var plainWord = lazyre.New(`^[A-Za-z0-9_./+@%:,=-]+$`)

// GrantPattern of a command line is its program and subcommand ("go test", "make lint"), or
// the program alone when it has no arguments. Only a single simple command of literal words,
// without assignments, redirections, pipes or lists, has one; a command whose second word is
// an option has none, since the program alone would cover every use of it.
func (t *Shell) GrantPattern(raw json.RawMessage) (string, bool) {
	words, ok := commandWords(raw)
	switch {
	case !ok || strings.HasPrefix(words[0], "-"):
		return "", false
	case len(words) == 1:
		return words[0], true
	case strings.HasPrefix(words[1], "-"):
		return "", false
	}
	return words[0] + " " + words[1], true
}

// GrantCovers reports whether the command has exactly the pattern.
func (t *Shell) GrantCovers(pattern string, raw json.RawMessage) bool {
	p, ok := t.GrantPattern(raw)
	return ok && p == pattern
}

// commandWords returns the words of a command line that is one simple command of literal,
// plain words.
func commandWords(raw json.RawMessage) ([]string, bool) {
	var args struct {
		Command string `json:"command"`
	}
	if json.Unmarshal(raw, &args) != nil {
		return nil, false
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(args.Command), "")
	if err != nil || len(f.Stmts) != 1 {
		return nil, false
	}
	s := f.Stmts[0]
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || s.Negated || s.Background || s.Coprocess || len(s.Redirs) > 0 || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return nil, false
	}
	words := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		lit := w.Lit()
		if len(w.Parts) != 1 || lit == "" || !plainWord.MatchString(lit) {
			return nil, false
		}
		words = append(words, lit)
	}
	return words, true
}

// GrantPattern of a fetch is its method, scheme and host ("GET https://api.example.com"):
// a grant covers that host and no other, whatever path or query.
func (t *HTTPFetch) GrantPattern(raw json.RawMessage) (string, bool) {
	var args fetchArgs
	if json.Unmarshal(raw, &args) != nil {
		return "", false
	}
	u, err := url.Parse(args.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", false
	}
	return args.method() + " " + u.Scheme + "://" + strings.ToLower(u.Host), true
}

// GrantCovers reports whether the fetch has exactly the pattern.
func (t *HTTPFetch) GrantCovers(pattern string, raw json.RawMessage) bool {
	p, ok := t.GrantPattern(raw)
	return ok && p == pattern
}

// GrantPattern of a write is the directory of the file, with a slash ("docs/"), or the file
// itself when it is at the top of the workspace: a grant for the top would cover every file.
// Nothing in .git has a pattern.
func (t *WriteFile) GrantPattern(raw json.RawMessage) (string, bool) {
	p, ok := grantPath(raw)
	if !ok {
		return "", false
	}
	if dir := path.Dir(p); dir != "." {
		return dir + "/", true
	}
	return p, true
}

// GrantCovers reports whether the file is the pattern's file or lies under its directory.
func (t *WriteFile) GrantCovers(pattern string, raw json.RawMessage) bool {
	p, ok := grantPath(raw)
	if !ok || pattern == "" {
		return false
	}
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(p, pattern)
	}
	return p == pattern
}

// grantPath is the cleaned workspace path of a write, if it may be granted at all.
func grantPath(raw json.RawMessage) (string, bool) {
	var args struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(raw, &args) != nil {
		return "", false
	}
	p, err := workspacePath(strings.ReplaceAll(args.Path, "\\", "/"))
	if err != nil || p == "." {
		return "", false
	}
	for _, part := range strings.Split(p, "/") {
		if strings.EqualFold(part, ".git") {
			return "", false
		}
	}
	return p, true
}
