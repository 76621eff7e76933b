package tools

import (
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/loopbot/loopbot/agent"
)

// This file judges programs that are not on the read-only allowlist. Each one needs approval;
// the rules here only decide which of them are dangerous (destructive, privileged, writing
// outside the workspace, or running code nobody can read before it runs) and look inside the
// commands that wrappers and shells run.

var (
	shells      = nameSet{"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "posh", "fish", "csh", "tcsh"}
	posixShells = nameSet{"sh", "bash", "dash", "ksh", "mksh", "ash", "posh"}
	runners     = nameSet{"python", "python3", "python2", "perl", "ruby", "node", "php", "lua", "tclsh"}
	fetchers    = nameSet{"curl", "wget", "fetch", "nc", "ncat", "socat"}
	// dangerousNames change the system, take privileges or destroy data whatever their
	// arguments.
	dangerousNames = nameSet{"sudo", "su", "doas", "pkexec", "runuser", "dd", "shred", "wipefs", "fdisk", "sfdisk",
		"parted", "mkswap", "swapoff", "swapon", "mount", "umount", "shutdown", "reboot", "halt", "poweroff",
		"init", "telinit", "chroot", "insmod", "rmmod", "modprobe", "iptables", "nft", "passwd", "useradd",
		"userdel", "usermod", "killall", "pkill", "crontab", "systemctl", "mke2fs", "nsenter", "setcap"}
	// writers take paths they change; those must stay inside the workspace.
	writers = nameSet{"rm", "rmdir", "mkdir", "touch", "mv", "cp", "ln", "install", "rsync", "truncate",
		"chmod", "chown", "chgrp", "tar", "unzip", "patch", "curl", "wget", "split"}
	wrappers = nameSet{"env", "nice", "nohup", "timeout", "command", "exec", "time", "stdbuf", "xargs", "ionice",
		"setsid", "builtin", "busybox"}
)

// nameSet is a small set of names written as a literal, which the compiler lays out in the
// binary: a map would be built at every start, whether a command is ever judged or not.
type nameSet []string

func (s nameSet) has(name string) bool { return slices.Contains(s, name) }

// unlisted judges a program that is not on the allowlist: it needs approval at least.
func (v *verdict) unlisted(name, base string, rest []arg, words []*syntax.Word, depth int) {
	args := strs(rest)
	flags, operands := splitFlags(args)
	switch {
	case dangerousNames.has(base) || strings.HasPrefix(base, "mkfs"):
		v.raise(agent.RiskDangerous, "%s can take privileges or damage the system", base)
	case wrappers.has(base):
		v.wrapper(base, rest, depth)
		return
	case shells.has(base) || base == "eval" || base == "source" || base == ".":
		v.shell(base, rest, words, depth)
		return
	case runners.has(base):
		v.raise(agent.RiskConfirm, "%s runs a program", base)
		return
	case base == "trap":
		// The action of a trap is code, run later like eval.
		if len(rest) > 0 && rest[0].dyn {
			v.raise(agent.RiskDangerous, "trap runs code built at run time")
		} else if len(rest) > 0 {
			v.line(rest[0].s, depth+1)
		}
	}
	if !systemPath(name) {
		v.raise(agent.RiskConfirm, "runs %s, a program outside the system directories", name)
	}
	if writers.has(base) {
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
	}
	if fetchers.has(base) {
		v.raise(agent.RiskConfirm, "%s reaches the network", base)
	}
	v.raise(agent.RiskConfirm, "%s is not on the read-only allowlist", printable(name))
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
		if short != 0 && !strings.HasPrefix(f, "--") && strings.HasPrefix(f, "-") && strings.ContainsRune(f[1:], short) {
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
	case "curl", "wget":
		targets = nil
		for _, o := range operands {
			if !strings.Contains(o, "://") {
				targets = append(targets, o)
			}
		}
	}
	for _, f := range flags {
		// Options with attached values, such as --output=/etc/x or -t/dir.
		if i := strings.IndexByte(f, '='); i >= 0 && v.outside(f[i+1:]) {
			v.raise(agent.RiskDangerous, "%s writes to %s, outside the workspace", base, f[i+1:])
		}
	}
	for _, t := range targets {
		if v.outside(t) {
			v.raise(agent.RiskDangerous, "%s changes %s, outside the workspace", base, printable(t))
		}
	}
}

// wrapper judges env, nice, timeout, xargs and the like: the wrapper needs approval, and the
// command it runs is judged in turn.
func (v *verdict) wrapper(base string, rest []arg, depth int) {
	if base == "env" {
		if len(rest) == 0 {
			return // env alone is on the allowlist; argv only gets here for a path like ./env
		}
		for i := range rest {
			script, ok := splitString(rest, i)
			if !ok {
				continue
			}
			if script.dyn {
				v.raise(agent.RiskDangerous, "env -S runs a command line built at run time")
				return
			}
			v.raise(agent.RiskConfirm, "env -S runs the command line %q", script.s)
			v.line(script.s, depth+1)
		}
		v.raise(agent.RiskConfirm, "env with arguments runs a command or changes its environment")
	}
	inner := unwrap(base, rest)
	if base == "xargs" {
		if len(inner) == 0 {
			v.raise(agent.RiskConfirm, "xargs runs echo on its input")
			return
		}
		// The arguments xargs adds come from its input.
		inner = append(inner[:len(inner):len(inner)], arg{dyn: true})
	}
	v.raise(agent.RiskConfirm, "%s runs another command", base)
	v.argv(inner, nil, depth+1)
}

// splitString returns the string of env -S STRING, -SSTRING or --split-string=STRING at i.
func splitString(args []arg, i int) (arg, bool) {
	a := args[i]
	switch {
	case a.dyn && i == 0:
		return a, true // env "$x": whatever it holds may be -S
	case a.s == "--split-string" || (strings.HasPrefix(a.s, "--s") && strings.HasPrefix("--split-string", a.s)):
		if i+1 < len(args) {
			return args[i+1], true
		}
	case strings.HasPrefix(a.s, "--s") && strings.Contains(a.s, "="):
		if name := a.s[:strings.IndexByte(a.s, '=')]; strings.HasPrefix("--split-string", name) {
			a.s = a.s[len(name)+1:]
			return a, true
		}
	case shortOption(a.s) && strings.Contains(a.s, "S"):
		// -S STRING, -SSTRING, or S grouped behind other flags as in -iS STRING or -iSSTRING
		// (the other short options of env take no value but -u and -C, which are rare
		// enough to be read as -S here too).
		if rest := a.s[strings.IndexByte(a.s, 'S')+1:]; rest != "" {
			a.s = rest
			return a, true
		}
		if i+1 < len(args) {
			return args[i+1], true
		}
	}
	return arg{}, false
}

// unwrap returns the command a wrapper runs, skipping the wrapper's own options.
func unwrap(base string, args []arg) []arg {
	var valued nameSet
	switch base {
	case "env":
		valued = nameSet{"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}
	case "nice":
		valued = nameSet{"-n", "--adjustment"}
	case "timeout":
		valued = nameSet{"-s", "--signal", "-k", "--kill-after"}
	case "stdbuf":
		valued = nameSet{"-i", "-o", "-e"}
	case "xargs":
		valued = nameSet{"-n", "-I", "-i", "-d", "-P", "-L", "-s", "-E", "-a", "--max-args", "--delimiter", "--arg-file"}
	case "ionice":
		valued = nameSet{"-c", "-n", "-p"}
	case "busybox":
		return args
	}
	i := 0
	for i < len(args) {
		a := args[i].s
		switch {
		case args[i].dyn:
			return args[i:]
		case a == "--":
			i++
			return tail(base, args[i:])
		case base == "env" && strings.Contains(a, "=") && !strings.HasPrefix(a, "-"):
			i++
		case strings.HasPrefix(a, "-") && a != "-":
			if valued.has(a) {
				i++
			}
			i++
		default:
			return tail(base, args[i:])
		}
	}
	return nil
}

func tail(base string, args []arg) []arg {
	if base == "timeout" && len(args) > 0 {
		return args[1:] // the duration
	}
	return args
}

// shell judges sh -c, eval and source. A script written in the line is judged in turn; one
// built at run time, or read from standard input (a here-doc or a pipe into sh), cannot be
// read before it runs and is dangerous.
func (v *verdict) shell(base string, rest []arg, words []*syntax.Word, depth int) {
	for _, w := range words {
		if fetchesInSubst(w) {
			v.raise(agent.RiskDangerous, "%s runs code downloaded from the network", base)
		}
	}
	switch base {
	case "eval":
		var script []string
		for _, a := range rest {
			if a.dyn {
				v.raise(agent.RiskDangerous, "eval runs code built at run time")
				return
			}
			script = append(script, a.s)
		}
		v.raise(agent.RiskConfirm, "eval runs a string as code")
		v.line(strings.Join(script, " "), depth+1)
		return
	case "source", ".":
		v.raise(agent.RiskConfirm, "%s runs a script file", base)
		return
	}
	command, plain, stdin := false, posixShells.has(base), false
	i := 0
	for ; i < len(rest); i++ {
		a := rest[i]
		if a.dyn {
			v.raise(agent.RiskDangerous, "%s runs with an argument computed at run time", base)
			return
		}
		if a.s == "--" {
			i++
			break
		}
		if len(a.s) < 2 || (a.s[0] != '-' && a.s[0] != '+') {
			break
		}
		if a.s[0] == '-' && !strings.HasPrefix(a.s, "--") && strings.ContainsRune(a.s, 'c') {
			command = true
		}
		if strings.ContainsRune(a.s, 's') && !strings.HasPrefix(a.s, "--") {
			stdin = true
		}
		if strings.Trim(a.s[1:], "ceux") != "" {
			plain = false
		}
		if a.s == "-o" || a.s == "+o" {
			i++
		}
	}
	switch {
	case command && i >= len(rest):
		v.raise(agent.RiskConfirm, "%s -c without a script", base)
	case command:
		if !plain {
			v.raise(agent.RiskConfirm, "%s runs with options that change how the script runs", base)
		}
		v.line(rest[i].s, depth+1)
	case stdin || i >= len(rest):
		v.raise(agent.RiskDangerous, "%s runs a script it reads from its input, which cannot be checked before it runs", base)
	default:
		v.raise(agent.RiskConfirm, "%s runs the script %s", base, rest[i].s)
	}
}

// fetchesInSubst reports a command or process substitution inside the word that runs a
// network fetcher, as in sh -c "$(curl ...)" or bash <(wget ...).
func fetchesInSubst(w *syntax.Word) bool {
	found := false
	syntax.Walk(w, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
			if a := wordArg(c.Args[0]); !a.dyn && fetchers.has(path.Base(a.s)) {
				found = true
			}
		}
		return !found
	})
	return found
}

// gitDanger raises git subcommands that destroy work or rewrite shared history.
func (v *verdict) gitDanger(sub string, args []string) {
	switch {
	case sub == "push" && (hasFlag(args, 'f', "--force") || hasFlag(args, 0, "--force-with-lease") || hasFlag(args, 0, "--mirror")):
		v.raise(agent.RiskDangerous, "git push --force rewrites remote history")
	case sub == "reset" && hasFlag(args, 0, "--hard"):
		v.raise(agent.RiskDangerous, "git reset --hard throws away changes")
	case sub == "clean" && hasFlag(args, 'f', "--force"):
		v.raise(agent.RiskDangerous, "git clean -f deletes untracked files")
	}
}
