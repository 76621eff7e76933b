package tools

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/internal/lazyre"
)

// AssessCommand rates a command line for /bin/sh -c. It parses the line as POSIX shell (with
// mvdan.cc/sh) and judges every simple command it contains: in pipelines, lists, loops,
// subshells, command substitutions, and behind sh -c, env, xargs or find -exec. A compound
// command is as risky as its riskiest part.
//
// The judgement is an allowlist. A line runs without asking (safe when safeReadonly is set,
// cautious otherwise) only when every simple command is a literal program on the read-only
// allowlist (readOnlyPrograms in shellrisk_rules.go) and each of its options and operands
// passes that program's rules. Everything else needs approval (confirm). A program name that is not a literal
// (expansions, backslashes, patterns, eval or sh -c of a string built at run time, a script
// read from standard input) is dangerous, as are destructive commands and writes outside the
// workspace (shellrisk_danger.go).
func AssessCommand(line string, safeReadonly bool) (a agent.Assessment) {
	defer func() {
		// The assessor guards a sandbox; if it ever fails, the call waits for a person.
		if recover() != nil {
			a = agent.Assessment{Risk: agent.RiskDangerous, Reason: "the command could not be assessed"}
		}
	}()
	return assessCommand(line, safeReadonly)
}

// assessCommand is AssessCommand without the recover, so the fuzz target sees panics.
func assessCommand(line string, safeReadonly bool) agent.Assessment {
	v := &verdict{risk: agent.RiskSafe, reason: "only read-only commands"}
	v.line(line, 0)
	if v.risk == agent.RiskSafe && !safeReadonly {
		v.risk = agent.RiskCautious
	}
	return agent.Assessment{Risk: v.risk, Reason: v.reason}
}

type verdict struct {
	risk   agent.Risk
	reason string
	// leftWorkspace is set once a cd may have left the workspace: from then on every
	// relative path the line writes may be outside it.
	leftWorkspace bool
	// loopNames holds the variables of for loops over names of the workspace
	// (for f in *.go; do wc -l "$f"; done): "$f" is then like a pattern in the workspace.
	loopNames map[string]bool
}

func (v *verdict) raise(r agent.Risk, format string, args ...any) {
	if r > v.risk {
		v.risk, v.reason = r, fmt.Sprintf(format, args...)
	}
}

// Patterns caught on the raw text, whatever the parser makes of it: they are too dangerous to
// let an unusual spelling or quoting through.
var (
	rawRmRecursiveForce = lazyre.New(`\brm\s+(\S+\s+)*?(-[A-Za-z]*[rR][A-Za-z]*f|-[A-Za-z]*f[A-Za-z]*[rR]|-[rR]\s+-f|-f\s+-[rR])`)
	rawForkBomb         = lazyre.New(`:\s*\(\s*\)\s*\{`)
)

// maxDepth bounds the nesting the assessor follows: sh -c inside sh -c, and commands run by
// wrappers (env env ... ls) or find -exec.
const maxDepth = 8

// maxLine is the longest command line the assessor reads before asking a person; the raw
// patterns are still looked for in a longer one.
const maxLine = 64 << 10

func (v *verdict) line(line string, depth int) {
	if depth > maxDepth {
		v.raise(agent.RiskConfirm, "shell commands nested too deeply to assess")
		return
	}
	if strings.TrimSpace(line) == "" {
		v.raise(agent.RiskCautious, "empty command")
		return
	}
	if len(line) > maxLine {
		v.raise(agent.RiskConfirm, "the command is too long to assess")
	}
	if strings.Contains(line, "rm -rf /") || rawRmRecursiveForce.MatchString(line) {
		v.raise(agent.RiskDangerous, "rm -rf deletes recursively without asking")
	}
	if rawForkBomb.MatchString(line) {
		v.raise(agent.RiskDangerous, "looks like a fork bomb")
	}
	if len(line) > maxLine {
		return
	}
	file, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(line), "")
	if err != nil {
		v.raise(agent.RiskConfirm, "the command could not be parsed as POSIX shell: %v", err)
		return
	}
	inner := map[*syntax.BinaryCmd]bool{} // pipes inside a pipeline already judged whole
	syntax.Walk(file, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.FuncDecl:
			// A declaration such as "()0" parses with no name.
			if n.Name != nil && callsName(n.Body, n.Name.Value) {
				v.raise(agent.RiskDangerous, "function %s calls itself (fork bomb pattern)", n.Name.Value)
			}
			v.raise(agent.RiskConfirm, "defines a shell function")
		case *syntax.Stmt:
			if n.Background {
				v.raise(agent.RiskConfirm, "starts a command in the background")
			}
			for _, r := range n.Redirs {
				v.redirect(r)
			}
		case *syntax.WhileClause:
			// A loop that runs until a condition changes can feed a pipe without end.
			v.raise(agent.RiskConfirm, "loops until a condition changes")
		case *syntax.WordIter:
			if !plainVariable(n.Name.Value) {
				v.raise(agent.RiskConfirm, "the loop sets %s, which changes how commands run", n.Name.Value)
			}
			v.loop(n)
		case *syntax.ParamExp:
			if n.Exp != nil && (n.Exp.Op == syntax.AssignUnset || n.Exp.Op == syntax.AssignUnsetOrNull) {
				v.raise(agent.RiskConfirm, "assigns a variable inside an expansion")
			}
		case *syntax.BinaryArithm:
			if slices.Contains(arithAssigns, n.Op) {
				v.raise(agent.RiskConfirm, "assigns a variable inside arithmetic")
			}
		case *syntax.UnaryArithm:
			if n.Op == syntax.Inc || n.Op == syntax.Dec {
				v.raise(agent.RiskConfirm, "assigns a variable inside arithmetic")
			}
		case *syntax.BinaryCmd:
			if (n.Op == syntax.Pipe || n.Op == syntax.PipeAll) && !inner[n] {
				v.pipeline(n, inner)
			}
		case *syntax.CallExpr:
			v.call(n, depth)
		}
		return true
	})
}

var arithAssigns = []syntax.BinAritOperator{
	syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn,
	syntax.RemAssgn, syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn,
	syntax.ShrAssgn,
}

// loop notes whether the loop variable only takes names of the workspace.
func (v *verdict) loop(n *syntax.WordIter) {
	names := len(n.Items) > 0
	for _, w := range n.Items {
		a := wordArg(w)
		names = names && !a.dyn && workspaceName.MatchString(a.s) && inWorkspace(a.s)
	}
	if v.loopNames == nil {
		v.loopNames = map[string]bool{}
	}
	v.loopNames[n.Name.Value] = names
}

// workspaceName matches a file name or pattern that is neither an option nor split by the
// shell into several words.
var workspaceName = lazyre.New(`^[A-Za-z0-9_.*?\[\]][A-Za-z0-9_./*?\[\]+,=:@%-]*$`)

// loopArg returns the argument "$f" or $f stands for when f is the variable of a loop over
// workspace names.
func (v *verdict) loopArg(w *syntax.Word) (arg, bool) {
	parts := w.Parts
	if len(parts) == 1 {
		if dq, ok := parts[0].(*syntax.DblQuoted); ok {
			parts = dq.Parts
		}
	}
	if len(parts) != 1 {
		return arg{}, false
	}
	p, ok := parts[0].(*syntax.ParamExp)
	if !ok || p.Param == nil || p.Exp != nil || p.Index != nil || p.Slice != nil || p.Repl != nil || p.Names != 0 ||
		p.Excl || p.Length || p.Width || p.NestedParam != nil || !v.loopNames[p.Param.Value] {
		return arg{}, false
	}
	return arg{s: "*", glob: true}, true
}

// plainVariable reports a variable name no program reads from its environment: the ones that
// change how commands run (PATH, IFS, LD_PRELOAD, GIT_*...) are written in capitals.
func plainVariable(name string) bool {
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return name != ""
}

// callsName reports whether the subtree runs a command named name.
func callsName(n syntax.Node, name string) bool {
	found := false
	syntax.Walk(n, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
			if a := wordArg(c.Args[0]); !a.dyn && a.s == name {
				found = true
			}
		}
		return !found
	})
	return found
}

// arg is one word of a simple command as far as it is known before the shell runs.
type arg struct {
	s       string // the value with quoting removed; expansions contribute nothing
	dyn     bool   // holds a parameter, command or arithmetic expansion: known only at run time
	glob    bool   // holds unquoted pattern characters the shell expands to file names
	escaped bool   // an unquoted backslash escapes a character
	quoted  bool   // some part is quoted
	spliced bool   // quoted and unquoted pieces are joined, as in r''m
}

// dynamic stands for an argument whose value is only known at run time, in the string forms
// the destructive-command rules read.
const dynamic = "\x00dynamic"

// str is the argument as the destructive-command rules read it.
func (a arg) str() string {
	if a.dyn {
		return dynamic
	}
	return a.s
}

func strs(args []arg) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a.str()
	}
	return out
}

func wordArg(w *syntax.Word) arg {
	var a arg
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			v := p.Value
			for i := 0; i < len(v); i++ {
				c := v[i]
				switch {
				case c == '\\' && i+1 < len(v):
					a.escaped = true
					i++
					b.WriteByte(v[i])
					continue
				case c == '*' || c == '?':
					a.glob = true
				case c == '[' && strings.IndexByte(v[i+1:], ']') >= 0:
					a.glob = true
				}
				b.WriteByte(c)
			}
		case *syntax.SglQuoted:
			a.quoted = true
			if p.Dollar {
				a.escaped = true
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			a.quoted = true
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					a.dyn = true
					continue
				}
				b.WriteString(unescapeDouble(lit.Value))
			}
		default:
			a.dyn = true
		}
	}
	a.s = b.String()
	a.spliced = a.quoted && len(w.Parts) > 1
	return a
}

// unescapeDouble removes the backslashes that quote a character inside double quotes.
func unescapeDouble(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var writeOps = []syntax.RedirOperator{
	syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob,
	syntax.AppClob, syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob,
}

func (v *verdict) redirect(r *syntax.Redirect) {
	if r.Word == nil {
		return
	}
	a := wordArg(r.Word)
	target := a.str()
	switch {
	case r.Op == syntax.DplOut || r.Op == syntax.DplIn:
		if !a.dyn && (target == "-" || isNumber(target)) {
			return
		}
	case r.Op == syntax.RdrIn:
		switch {
		case a.dyn || a.glob:
			v.raise(agent.RiskConfirm, "reads its input from a path computed at run time")
		case touchesDevice(target):
			v.raise(agent.RiskConfirm, "reads its input from %s, a device or kernel file that may never end", target)
		}
		return
	case !slices.Contains(writeOps, r.Op):
		return
	}
	switch {
	case a.dyn || a.glob:
		v.raise(agent.RiskConfirm, "redirects output to a path computed at run time")
	case target == "/dev/null" || target == "/dev/stdout" || target == "/dev/stderr":
	case v.outside(target):
		v.raise(agent.RiskDangerous, "writes to %s, outside the workspace", target)
	default:
		v.raise(agent.RiskConfirm, "writes the file %s", target)
	}
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// outside reports whether a path written by a command may leave the workspace: absolute,
// home-relative, climbing with "..", or relative after a cd that may have left. URLs are not
// paths.
func (v *verdict) outside(p string) bool {
	if p == dynamic || strings.Contains(p, "://") {
		return false
	}
	return v.leftWorkspace || !inWorkspace(p)
}

// inWorkspace reports a path that names something under the current directory, assumed to
// be the workspace: relative, not home-relative, never climbing with "..".
func inWorkspace(p string) bool {
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return false
		}
	}
	return true
}

// touchesDevice reports a path, or an option carrying one (--file=/dev/zero, -f/dev/zero),
// that may name a device or a kernel file: reading /dev/zero or /dev/urandom never ends, and
// a program that holds its input in memory then fills it. Paths in the workspace do not
// count; /dev/null and the standard streams do not either.
func touchesDevice(s string) bool {
	candidates := []string{s}
	if strings.HasPrefix(s, "-") {
		if i := strings.IndexByte(s, '='); i >= 0 {
			candidates = append(candidates, s[i+1:])
		}
		if i := strings.IndexAny(s, "/~."); i >= 0 {
			candidates = append(candidates, s[i:])
		}
	}
	for _, c := range candidates {
		if c == "" || inWorkspace(c) {
			continue
		}
		p := path.Clean(c)
		switch p {
		case "/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr":
			continue
		}
		for strings.HasPrefix(p, "../") {
			p = p[3:]
		}
		p = strings.TrimPrefix(p, "/")
		for _, dir := range []string{"dev", "proc", "sys"} {
			if p == dir || strings.HasPrefix(p, dir+"/") {
				return true
			}
		}
	}
	return false
}

// call judges one simple command as written in the line.
func (v *verdict) call(c *syntax.CallExpr, depth int) {
	for _, a := range c.Assigns {
		if a.Name != nil {
			// Any variable may steer a program: GIT_EXTERNAL_DIFF, GIT_CONFIG_*, LD_AUDIT,
			// PATH, and the ones nobody has listed yet.
			v.raise(agent.RiskConfirm, "sets %s, which may change how commands run", a.Name.Value)
		}
	}
	if len(c.Args) == 0 {
		return
	}
	args := make([]arg, len(c.Args))
	for i, w := range c.Args {
		if a, ok := v.loopArg(w); ok && i > 0 {
			args[i] = a
			continue
		}
		args[i] = wordArg(w)
	}
	v.argv(args, c.Args, depth)
}

// argv judges one simple command. words are the parsed words behind args where known (nil
// for commands found behind wrappers such as find -exec), to look into substitutions.
func (v *verdict) argv(args []arg, words []*syntax.Word, depth int) {
	if len(args) == 0 {
		return
	}
	if depth > maxDepth {
		v.raise(agent.RiskConfirm, "commands nested too deeply to assess")
		return
	}
	name := args[0]
	switch {
	case name.dyn:
		v.raise(agent.RiskDangerous, "the program to run is computed at run time")
		return
	case name.escaped:
		v.raise(agent.RiskDangerous, "the program name %s is disguised with backslashes", name.s)
	case name.spliced:
		v.raise(agent.RiskDangerous, "the program name %s is spliced from quoted pieces", name.s)
	case name.glob:
		v.raise(agent.RiskDangerous, "the program name %s is a pattern the shell expands", name.s)
		return
	case name.s == "":
		v.raise(agent.RiskConfirm, "the program name is empty")
		return
	case name.quoted:
		v.raise(agent.RiskConfirm, "the program name %s is quoted", name.s)
	}
	base := path.Base(name.s)
	if systemPath(name.s) {
		if r, ok := readOnlyPrograms()[base]; ok {
			v.allowed(base, r, args[1:], depth)
			return
		}
	}
	v.unlisted(name.s, base, args[1:], words, depth)
}

// systemPath reports a program looked up in PATH or named in the system directories, which
// the sandbox mounts read-only.
func systemPath(name string) bool {
	if !strings.Contains(name, "/") {
		return true
	}
	for _, dir := range []string{"/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"} {
		if strings.HasPrefix(name, dir) && !strings.Contains(name[len(dir):], "/") {
			return true
		}
	}
	return false
}

// pipeline catches downloads piped into an interpreter, as in curl ... | sh.
// The pipes nested in b are added to inner, so that a long pipeline is judged once.
func (v *verdict) pipeline(b *syntax.BinaryCmd, inner map[*syntax.BinaryCmd]bool) {
	var stmts []*syntax.Stmt
	var flatten func(s *syntax.Stmt)
	flatten = func(s *syntax.Stmt) {
		if bc, ok := s.Cmd.(*syntax.BinaryCmd); ok && (bc.Op == syntax.Pipe || bc.Op == syntax.PipeAll) {
			inner[bc] = true
			flatten(bc.X)
			flatten(bc.Y)
			return
		}
		stmts = append(stmts, s)
	}
	flatten(b.X)
	flatten(b.Y)
	fetched := false
	for _, s := range stmts {
		if fetched && runsInterpreter(s) {
			v.raise(agent.RiskDangerous, "pipes a download into an interpreter")
			return
		}
		syntax.Walk(s, func(n syntax.Node) bool {
			if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
				if a := wordArg(c.Args[0]); !a.dyn && fetchers.has(path.Base(a.s)) {
					fetched = true
				}
			}
			return true
		})
	}
}

func runsInterpreter(s *syntax.Stmt) bool {
	found := false
	syntax.Walk(s, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
			a := wordArg(c.Args[0])
			if a.dyn {
				found = true // an unknown program reading a download is no better
				return false
			}
			base := path.Base(a.s)
			if wrappers.has(base) {
				return true
			}
			if shells.has(base) || runners.has(base) || base == "eval" || base == "source" || base == "." {
				found = true
			}
		}
		return !found
	})
	return found
}
