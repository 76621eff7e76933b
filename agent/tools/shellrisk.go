package tools

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/loopbot/loopbot/agent"
)

// AssessCommand rates a command line for /bin/sh -c. It parses the line as POSIX shell (with
// mvdan.cc/sh), looks at every simple command it contains (in pipelines, lists, subshells,
// command substitutions, and behind wrappers like env, xargs or sh -c), and returns the
// riskiest verdict: a compound command is as risky as its riskiest part. A line made only of
// known read-only programs is safe when safeReadonly is set and cautious otherwise; anything
// unknown, or that cannot be parsed, needs approval; destructive patterns are dangerous.
func AssessCommand(line string, safeReadonly bool) (a agent.Assessment) {
	defer func() {
		// The assessor guards a sandbox; if it ever fails, the call waits for a person.
		if recover() != nil {
			a = agent.Assessment{Risk: agent.RiskDangerous, Reason: "the command could not be assessed"}
		}
	}()
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
}

func (v *verdict) raise(r agent.Risk, format string, args ...any) {
	if r > v.risk {
		v.risk, v.reason = r, fmt.Sprintf(format, args...)
	}
}

// Patterns caught on the raw text, whatever the parser makes of it: they are too dangerous to
// let an unusual spelling or quoting through.
var (
	rawRmRecursiveForce = regexp.MustCompile(`\brm\s+(\S+\s+)*?(-[A-Za-z]*[rR][A-Za-z]*f|-[A-Za-z]*f[A-Za-z]*[rR]|-[rR]\s+-f|-f\s+-[rR])`)
	rawForkBomb         = regexp.MustCompile(`:\s*\(\s*\)\s*\{`)
)

// maxDepth bounds the nesting of sh -c inside sh -c the assessor follows.
const maxDepth = 8

func (v *verdict) line(line string, depth int) {
	if depth > maxDepth {
		v.raise(agent.RiskConfirm, "shell commands nested too deeply to assess")
		return
	}
	if strings.TrimSpace(line) == "" {
		v.raise(agent.RiskCautious, "empty command")
		return
	}
	if strings.Contains(line, "rm -rf /") || rawRmRecursiveForce.MatchString(line) {
		v.raise(agent.RiskDangerous, "rm -rf deletes recursively without asking")
	}
	if rawForkBomb.MatchString(line) {
		v.raise(agent.RiskDangerous, "looks like a fork bomb")
	}
	file, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(line), "")
	if err != nil {
		v.raise(agent.RiskConfirm, "the command could not be parsed as POSIX shell: %v", err)
		return
	}
	syntax.Walk(file, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.FuncDecl:
			if callsName(n.Body, n.Name.Value) {
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
		case *syntax.BinaryCmd:
			if n.Op == syntax.Pipe || n.Op == syntax.PipeAll {
				v.pipeline(n)
			}
		case *syntax.CallExpr:
			v.call(n, depth)
		}
		return true
	})
}

// callsName reports whether the subtree runs a command named name.
func callsName(n syntax.Node, name string) bool {
	found := false
	syntax.Walk(n, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
			if s, ok := static(c.Args[0]); ok && s == name {
				found = true
			}
		}
		return !found
	})
	return found
}

// static returns a word's value when it is known before the shell runs: literals and quoted
// literals, without expansions.
func static(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// dynamic stands for an argument whose value is only known at run time.
const dynamic = "\x00dynamic"

var writeOps = map[syntax.RedirOperator]bool{
	syntax.RdrOut: true, syntax.AppOut: true, syntax.RdrInOut: true, syntax.RdrClob: true,
	syntax.AppClob: true, syntax.RdrAll: true, syntax.RdrAllClob: true, syntax.AppAll: true, syntax.AppAllClob: true,
}

func (v *verdict) redirect(r *syntax.Redirect) {
	if r.Word == nil {
		return
	}
	target, ok := static(r.Word)
	if r.Op == syntax.DplOut || r.Op == syntax.DplIn {
		if ok && (target == "-" || isNumber(target)) {
			return
		}
	} else if !writeOps[r.Op] {
		return
	}
	switch {
	case !ok:
		v.raise(agent.RiskConfirm, "redirects output to a path computed at run time")
	case target == "/dev/null" || target == "/dev/stdout" || target == "/dev/stderr":
	case outside(target):
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
// home-relative, or climbing with "..". URLs are not paths.
func outside(p string) bool {
	if p == dynamic || strings.Contains(p, "://") {
		return false
	}
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
		return true
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

var (
	shells   = set("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish", "csh", "tcsh")
	runners  = set("python", "python3", "python2", "perl", "ruby", "node", "php", "lua", "tclsh")
	fetchers = set("curl", "wget", "fetch", "nc", "ncat", "socat")
	// readOnly programs read and print, and write nothing but their standard output.
	readOnly = set("ls", "cat", "grep", "egrep", "fgrep", "rg", "head", "tail", "wc", "echo", "printf", "pwd",
		"true", "false", "stat", "file", "du", "df", "cut", "tr", "basename", "dirname", "realpath", "readlink",
		"which", "whoami", "id", "date", "diff", "cmp", "md5sum", "sha1sum", "sha256sum", "sha512sum", "tree",
		"nl", "column", "seq", "sleep", "uname", "hostname", "test", "[", "jq", "comm", "fold", "rev", "tac",
		"od", "hexdump", "xxd", "strings", "expr", "uptime", "env", "printenv", "find", "sort", "uniq", "git", "tee")
	// dangerousNames change the system, take privileges or destroy data whatever their
	// arguments.
	dangerousNames = set("sudo", "su", "doas", "pkexec", "runuser", "dd", "shred", "wipefs", "fdisk", "sfdisk",
		"parted", "mkswap", "swapoff", "swapon", "mount", "umount", "shutdown", "reboot", "halt", "poweroff",
		"init", "telinit", "chroot", "insmod", "rmmod", "modprobe", "iptables", "nft", "passwd", "useradd",
		"userdel", "usermod", "killall", "pkill", "crontab", "systemctl", "mke2fs", "nsenter", "setcap")
	// writers take paths they change; those must stay inside the workspace.
	writers = set("rm", "rmdir", "mkdir", "touch", "tee", "mv", "cp", "ln", "install", "rsync", "truncate",
		"chmod", "chown", "chgrp", "sed", "tar", "unzip", "patch", "curl", "wget", "git", "sort", "uniq", "split")
	wrappers = set("env", "nice", "nohup", "timeout", "command", "exec", "time", "stdbuf", "xargs", "ionice", "setsid", "builtin")
	// gitReadOnly subcommands only look.
	gitReadOnly = set("status", "log", "diff", "show", "ls-files", "rev-parse", "blame", "grep", "describe", "shortlog")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// riskyAssigns change how every later command behaves.
var riskyAssigns = set("PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "IFS", "ENV", "BASH_ENV", "HOME", "SHELL")

func (v *verdict) call(c *syntax.CallExpr, depth int) {
	for _, a := range c.Assigns {
		if a.Name != nil && riskyAssigns[a.Name.Value] {
			v.raise(agent.RiskConfirm, "sets %s, which changes how commands run", a.Name.Value)
		}
	}
	if len(c.Args) == 0 {
		return
	}
	args := make([]string, len(c.Args))
	for i, w := range c.Args {
		if s, ok := static(w); ok {
			args[i] = s
		} else {
			args[i] = dynamic
		}
	}
	v.argv(args, c.Args, depth)
}

// argv judges one simple command. words are the parsed words behind args where known (nil
// for commands found behind wrappers such as find -exec), to look into substitutions.
func (v *verdict) argv(args []string, words []*syntax.Word, depth int) {
	if len(args) == 0 {
		return
	}
	name := args[0]
	if name == dynamic {
		v.raise(agent.RiskConfirm, "the program to run is computed at run time")
		return
	}
	base := path.Base(name)
	systemPath := !strings.Contains(name, "/") || strings.HasPrefix(name, "/usr/") || strings.HasPrefix(name, "/bin/") || strings.HasPrefix(name, "/sbin/")
	rest := args[1:]
	flags, operands := splitFlags(rest)

	switch {
	case dangerousNames[base] || strings.HasPrefix(base, "mkfs"):
		v.raise(agent.RiskDangerous, "%s can take privileges or damage the system", base)
	case wrappers[base]:
		inner := unwrap(base, rest)
		if len(inner) == 0 {
			if base == "xargs" {
				v.raise(agent.RiskConfirm, "xargs runs echo on its input")
			}
			return
		}
		if base == "xargs" || base == "exec" || base == "setsid" || base == "nohup" {
			v.raise(agent.RiskConfirm, "%s runs another command", base)
		}
		v.argv(inner, nil, depth)
		return
	case shells[base] || base == "eval" || base == "source" || base == ".":
		v.shell(base, rest, words, depth)
		return
	case runners[base]:
		v.raise(agent.RiskConfirm, "%s runs a program", base)
		return
	}

	if !systemPath {
		v.raise(agent.RiskConfirm, "runs %s, a program outside the system directories", name)
	}
	if writers[base] {
		v.writes(base, flags, operands)
	}
	switch base {
	case "rm":
		recursive := hasFlag(flags, 'r', "--recursive") || hasFlag(flags, 'R', "")
		force := hasFlag(flags, 'f', "--force")
		switch {
		case recursive && force:
			v.raise(agent.RiskDangerous, "rm -rf deletes recursively without asking")
		case force:
			v.raise(agent.RiskDangerous, "rm -f deletes without asking")
		case recursive:
			for _, o := range operands {
				if o == "*" || o == "." || o == ".." || o == "~" || o == "/" || o == dynamic {
					v.raise(agent.RiskDangerous, "rm -r of %s deletes everything there", printable(o))
				}
			}
		}
		v.raise(agent.RiskConfirm, "rm deletes files")
	case "mv", "cp", "ln", "install", "rsync":
		if hasFlag(flags, 'f', "--force") {
			v.raise(agent.RiskDangerous, "%s -f overwrites without asking", base)
		}
	case "chmod", "chown", "chgrp":
		if hasFlag(flags, 'R', "--recursive") {
			v.raise(agent.RiskDangerous, "%s -R changes a whole tree", base)
		}
	case "git":
		v.git(rest)
		return
	case "find":
		v.find(rest, depth)
		return
	case "sort":
		if hasFlag(flags, 'o', "--output") {
			v.raise(agent.RiskConfirm, "sort -o writes a file")
		}
	case "uniq":
		if len(operands) > 1 {
			v.raise(agent.RiskConfirm, "uniq writes its output file")
		}
	case "tee":
		if len(operands) > 0 {
			v.raise(agent.RiskConfirm, "tee writes files")
		}
	}
	if !readOnly[base] {
		if fetchers[base] {
			v.raise(agent.RiskConfirm, "%s reaches the network", base)
		}
		v.raise(agent.RiskConfirm, "%s is not known to be read-only", printable(name))
	}
}

func printable(s string) string {
	if s == dynamic {
		return "a value computed at run time"
	}
	return s
}

// splitFlags separates arguments that look like options from the operands, stopping at "--".
func splitFlags(args []string) (flags, operands []string) {
	for i, a := range args {
		if a == "--" {
			return flags, append(operands, args[i+1:]...)
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
		} else {
			operands = append(operands, a)
		}
	}
	return flags, operands
}

// hasFlag reports a short flag (alone or grouped, as in -rf) or a long one.
func hasFlag(flags []string, short rune, long string) bool {
	for _, f := range flags {
		if long != "" && (f == long || strings.HasPrefix(f, long+"=")) {
			return true
		}
		if !strings.HasPrefix(f, "--") && strings.ContainsRune(f[1:], short) {
			return true
		}
	}
	return false
}

// writes raises a writer command whose paths leave the workspace.
func (v *verdict) writes(base string, flags, operands []string) {
	targets := operands
	switch base {
	case "cp", "ln", "install", "rsync":
		// Only the destination changes; reading from elsewhere is fine.
		if len(operands) > 0 {
			targets = operands[len(operands)-1:]
		}
	case "sed":
		if !hasFlag(flags, 'i', "--in-place") {
			return
		}
	case "git", "sort", "uniq", "curl", "wget":
		targets = nil
	}
	for _, f := range flags {
		// Options with attached values, such as --output=/etc/x or -t/dir.
		if i := strings.IndexByte(f, '='); i >= 0 && outside(f[i+1:]) {
			v.raise(agent.RiskDangerous, "%s writes to %s, outside the workspace", base, f[i+1:])
		}
	}
	if base == "curl" || base == "wget" || base == "sort" {
		targets = outputOperands(operands)
	}
	for _, t := range targets {
		if outside(t) {
			v.raise(agent.RiskDangerous, "%s changes %s, outside the workspace", base, t)
		}
	}
}

// outputOperands is a rough reading of curl -o FILE, wget -O FILE and sort -o FILE: any
// operand that looks like a path is treated as written.
func outputOperands(operands []string) []string {
	var out []string
	for _, o := range operands {
		if !strings.Contains(o, "://") {
			out = append(out, o)
		}
	}
	return out
}

// unwrap returns the command a wrapper runs, skipping the wrapper's own options.
func unwrap(base string, args []string) []string {
	valued := map[string]bool{}
	switch base {
	case "env":
		valued = set("-u", "--unset", "-C", "--chdir", "-S")
	case "nice":
		valued = set("-n", "--adjustment")
	case "timeout":
		valued = set("-s", "--signal", "-k", "--kill-after")
	case "stdbuf":
		valued = set("-i", "-o", "-e")
	case "xargs":
		valued = set("-n", "-I", "-i", "-d", "-P", "-L", "-s", "-E", "-a", "--max-args", "--delimiter", "--arg-file")
	case "ionice":
		valued = set("-c", "-n", "-p")
	}
	i := 0
	for i < len(args) {
		a := args[i]
		switch {
		case a == "--":
			i++
			return tail(base, args[i:])
		case base == "env" && strings.Contains(a, "=") && !strings.HasPrefix(a, "-"):
			i++
		case strings.HasPrefix(a, "-") && a != "-":
			if valued[a] {
				i++
			}
			i++
		default:
			return tail(base, args[i:])
		}
	}
	return nil
}

func tail(base string, args []string) []string {
	if base == "timeout" && len(args) > 0 {
		return args[1:] // the duration
	}
	return args
}

// shell judges sh -c, eval and source: the script they run is assessed in turn when it is
// written in the line, and needs approval otherwise.
func (v *verdict) shell(base string, rest []string, words []*syntax.Word, depth int) {
	for _, w := range words {
		if fetchesInSubst(w) {
			v.raise(agent.RiskDangerous, "%s runs code downloaded from the network", base)
		}
	}
	switch base {
	case "eval":
		script := strings.Join(rest, " ")
		if strings.Contains(script, dynamic) {
			v.raise(agent.RiskConfirm, "eval runs code computed at run time")
			return
		}
		v.line(script, depth+1)
		return
	case "source", ".":
		v.raise(agent.RiskConfirm, "%s runs a script file", base)
		return
	}
	for i, a := range rest {
		if a == "-c" || strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsRune(a, 'c') {
			if i+1 >= len(rest) || rest[i+1] == dynamic {
				v.raise(agent.RiskConfirm, "%s -c runs a script computed at run time", base)
				return
			}
			v.line(rest[i+1], depth+1)
			return
		}
	}
	v.raise(agent.RiskConfirm, "%s runs a script", base)
}

// fetchesInSubst reports a command or process substitution inside the word that runs a
// network fetcher, as in sh -c "$(curl ...)" or bash <(wget ...).
func fetchesInSubst(w *syntax.Word) bool {
	found := false
	syntax.Walk(w, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
			if s, ok := static(c.Args[0]); ok && fetchers[path.Base(s)] {
				found = true
			}
		}
		return !found
	})
	return found
}

// pipeline catches downloads piped into an interpreter, as in curl ... | sh.
func (v *verdict) pipeline(b *syntax.BinaryCmd) {
	var stmts []*syntax.Stmt
	var flatten func(s *syntax.Stmt)
	flatten = func(s *syntax.Stmt) {
		if bc, ok := s.Cmd.(*syntax.BinaryCmd); ok && (bc.Op == syntax.Pipe || bc.Op == syntax.PipeAll) {
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
				if name, ok := static(c.Args[0]); ok && fetchers[path.Base(name)] {
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
			name, ok := static(c.Args[0])
			if !ok {
				found = true // an unknown program reading a download is no better
			}
			base := path.Base(name)
			if wrappers[base] {
				return true
			}
			if shells[base] || runners[base] || base == "eval" || base == "source" || base == "." {
				found = true
			}
		}
		return !found
	})
	return found
}

func (v *verdict) git(args []string) {
	_, operands := splitFlags(args)
	sub := ""
	if len(operands) > 0 {
		sub = operands[0]
	}
	switch {
	case sub == "push" && (hasFlag(args, 'f', "--force") || hasFlag(args, 0, "--force-with-lease") || hasFlag(args, 0, "--mirror")):
		v.raise(agent.RiskDangerous, "git push --force rewrites remote history")
	case sub == "reset" && hasFlag(args, 0, "--hard"):
		v.raise(agent.RiskDangerous, "git reset --hard throws away changes")
	case sub == "clean" && hasFlag(args, 'f', "--force"):
		v.raise(agent.RiskDangerous, "git clean -f deletes untracked files")
	case gitReadOnly[sub]:
	default:
		v.raise(agent.RiskConfirm, "git %s may change the repository or reach the network", sub)
	}
}

// find is read-only unless it deletes, writes files or runs commands; the commands it runs
// with -exec are judged like any other.
func (v *verdict) find(args []string, depth int) {
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-delete":
			v.raise(agent.RiskConfirm, "find -delete deletes files")
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			v.raise(agent.RiskConfirm, "find %s writes a file", args[i])
			if i+1 < len(args) && outside(args[i+1]) {
				v.raise(agent.RiskDangerous, "find writes %s, outside the workspace", args[i+1])
			}
		case "-exec", "-execdir", "-ok", "-okdir":
			v.raise(agent.RiskConfirm, "find %s runs a command", args[i])
			j := i + 1
			for j < len(args) && args[j] != ";" && args[j] != "+" {
				j++
			}
			v.argv(args[i+1:j], nil, depth)
			i = j
		}
	}
}
