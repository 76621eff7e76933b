package tools

import (
	"fmt"
	"strings"
	"sync"
)

// gitGlobal are the options git may get before its subcommand. -c, --exec-path, --git-dir,
// --work-tree and --config-env are not among them: they make git run other programs or read
// another repository's configuration, which can name programs to run.
var gitGlobal = nameSet{"--no-pager", "-P", "--no-optional-locks", "--no-replace-objects", "--literal-pathspecs",
	"--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--version"}

// gitReadOnly are the subcommands that only look at the repository, each with a check of its
// own where some of its forms change it.
var gitReadOnly = sync.OnceValue(func() map[string]func([]arg) string {
	return map[string]func([]arg) string{
		"status": nil, "log": nil, "diff": nil, "show": nil, "ls-files": nil, "ls-tree": nil, "rev-parse": nil,
		"rev-list": nil, "blame": nil, "grep": nil, "describe": nil, "shortlog": nil, "cat-file": nil,
		"show-ref": nil, "diff-tree": nil, "diff-files": nil, "diff-index": nil, "whatchanged": nil,
		"merge-base": nil, "name-rev": nil, "for-each-ref": nil, "count-objects": nil, "version": nil,
		"branch": gitBranch, "tag": gitTag, "remote": gitRemote, "config": gitConfig,
	}
})

// gitRefused are options of the read-only subcommands that run a program (a pager, an
// external diff, a textconv or filter driver, a help browser) or write a file.
var gitRefused = []string{"output", "open-files-in-pager", "ext-diff", "textconv", "filters", "exec",
	"upload-pack", "receive-pack", "help", "paginate", "git-dir", "work-tree", "config-env"}

// gitRule lets git run read-only subcommands without options that run programs or write
// files. Destructive subcommands are raised further by gitDanger.
func gitRule(v *verdict, args []arg, _ int) string {
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i].s, "-"); i++ {
		a := args[i].s
		switch {
		case gitGlobal.has(a):
		case a == "-C" && i+1 < len(args):
			if dir := args[i+1]; dir.dyn || !inWorkspace(dir.s) {
				return "git -C leaves the workspace"
			}
			i++
		default:
			return fmt.Sprintf("git option %s may run a program or read another repository's configuration", a)
		}
	}
	if i >= len(args) {
		return ""
	}
	sub, rest := args[i].s, args[i+1:]
	check, ok := gitReadOnly()[sub]
	if !ok {
		v.gitDanger(sub, strs(rest))
		return fmt.Sprintf("git %s may change the repository or reach the network", sub)
	}
	for j, a := range rest {
		if a.s == "--" {
			break
		}
		if n := longName(a.s); n != "" {
			for _, r := range gitRefused {
				if !abbreviates(n, r) {
					continue
				}
				if r == "output" {
					target, _ := optionValue(rest, j, 0)
					return v.writesTo("git "+sub+" --output", target)
				}
				return fmt.Sprintf("git %s --%s may run a program or write a file", sub, r)
			}
			continue
		}
		if sub == "grep" && shortOption(a.s) && strings.ContainsRune(a.s, 'O') {
			return "git grep -O opens the matches in a pager command"
		}
	}
	if check != nil {
		return check(rest)
	}
	return ""
}

// onlyListing checks a subcommand that lists with the given flags and changes things
// otherwise: every option must be one of flags, and operands are only allowed as patterns
// of one of listing.
func onlyListing(sub string, args []arg, flags, listing nameSet) string {
	list, ops := false, 0
	for _, a := range args {
		if !strings.HasPrefix(a.s, "-") {
			ops++
			continue
		}
		name := a.s
		if i := strings.IndexByte(name, '='); i >= 0 {
			name = name[:i]
		}
		if !flags.has(name) {
			return fmt.Sprintf("git %s %s may change the repository", sub, a.s)
		}
		list = list || listing.has(name)
	}
	if ops > 0 && !list {
		return fmt.Sprintf("git %s with a name changes the repository", sub)
	}
	return ""
}

var (
	gitBranchFlags = nameSet{"-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "--list", "-l", "--show-current",
		"--no-color", "--color", "--contains", "--no-contains", "--merged", "--no-merged", "--sort", "--format",
		"--points-at", "--column", "--no-column", "-i", "--ignore-case", "--abbrev", "--no-abbrev"}
	gitTagFlags = nameSet{"-l", "--list", "-n", "--sort", "--contains", "--no-contains", "--merged", "--no-merged",
		"--points-at", "--format", "--column", "--no-column", "-i", "--ignore-case", "--color"}
	gitConfigFlags = nameSet{"--list", "-l", "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--show-origin",
		"--show-scope", "--name-only", "--null", "-z", "--local", "--global", "--system", "--worktree",
		"--includes", "--no-includes", "--type", "--bool", "--int", "--bool-or-int", "--path", "--default",
		"--file", "-f", "--blob"}
	gitConfigReads = nameSet{"--list", "-l", "--get", "--get-all", "--get-regexp", "--get-urlmatch"}
	gitListing     = nameSet{"--list", "-l"}
)

func gitBranch(args []arg) string { return onlyListing("branch", args, gitBranchFlags, gitListing) }

func gitTag(args []arg) string { return onlyListing("tag", args, gitTagFlags, gitListing) }

func gitRemote(args []arg) string {
	for _, a := range args {
		if a.s != "-v" && a.s != "--verbose" {
			return "git remote with arguments may change remotes or reach the network"
		}
	}
	return ""
}

// gitConfig lets git config read values (--list, --get..., or the newer list and get
// subcommands); anything else may set them.
func gitConfig(args []arg) string {
	if len(args) > 0 && (args[0].s == "list" || args[0].s == "get") {
		args = args[1:]
		for _, a := range args {
			if strings.HasPrefix(a.s, "-") && !gitConfigFlags.has(strings.SplitN(a.s, "=", 2)[0]) {
				return fmt.Sprintf("git config %s may change the configuration", a.s)
			}
		}
		return ""
	}
	reads := false
	for _, a := range args {
		name := strings.SplitN(a.s, "=", 2)[0]
		if !strings.HasPrefix(name, "-") {
			continue
		}
		if !gitConfigFlags.has(name) {
			return fmt.Sprintf("git config %s may change the configuration", a.s)
		}
		reads = reads || gitConfigReads.has(name)
	}
	if !reads {
		return "git config without --get or --list may change the configuration"
	}
	return ""
}
