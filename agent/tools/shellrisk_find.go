package tools

import (
	"fmt"
	"strings"

	"github.com/loopbot/loopbot/agent"
)

// The tests and actions of find that only look and print: findUnary take no value,
// findValued take one. Anything else (-delete, -exec, -fprint...) needs approval.
var (
	findUnary = nameSet{"-print", "-print0", "-ls", "-prune", "-quit", "-not", "-a", "-and", "-o", "-or", "(", ")", "!",
		",", "-true", "-false", "-empty", "-depth", "-d", "-follow", "-xdev", "-mount", "-noleaf", "-nouser",
		"-nogroup", "-readable", "-writable", "-executable", "-daystart", "-ignore_readdir_race",
		"-noignore_readdir_race"}
	findValued = nameSet{"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
		"-regextype", "-type", "-xtype", "-size", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin",
		"-newer", "-anewer", "-cnewer", "-perm", "-user", "-group", "-uid", "-gid", "-links", "-inum",
		"-samefile", "-lname", "-ilname", "-fstype", "-used", "-maxdepth", "-mindepth", "-printf",
		"-files0-from"}
)

// findRule lets find search and print. -delete and the actions that write files need
// approval, and are dangerous when they reach outside the workspace; the commands -exec runs
// are judged in turn.
func findRule(v *verdict, args []arg, depth int) string {
	i := 0
	for i < len(args) {
		s := args[i].s
		switch {
		case s == "-H" || s == "-L" || s == "-P" || strings.HasPrefix(s, "-O"):
			i++
			continue
		case s == "-D":
			i += 2
			continue
		}
		break
	}
	outside := false
	starts := 0
	for ; i < len(args) && !strings.HasPrefix(args[i].s, "-") && args[i].s != "(" && args[i].s != "!"; i++ {
		starts++
		if args[i].dyn || v.outside(args[i].s) {
			outside = true
		}
	}
	if starts == 0 && v.leftWorkspace {
		outside = true
	}
	reason := ""
	note := func(r string) {
		if reason == "" {
			reason = r
		}
	}
	for ; i < len(args); i++ {
		s := args[i].s
		switch {
		case args[i].dyn:
			note("find gets an argument computed at run time")
		case findUnary.has(s):
		case findValued.has(s) || (strings.HasPrefix(s, "-newer") && len(s) == len("-newerXY")):
			i++
		case s == "-delete":
			if outside {
				v.raise(agent.RiskDangerous, "find -delete deletes files outside the workspace")
			}
			note("find -delete deletes files")
		case s == "-exec" || s == "-execdir" || s == "-ok" || s == "-okdir":
			j := i + 1
			for j < len(args) && args[j].s != ";" && args[j].s != "+" {
				j++
			}
			note(fmt.Sprintf("find %s runs a command", s))
			v.argv(args[i+1:j], nil, depth+1)
			i = j
		case s == "-fprint" || s == "-fprint0" || s == "-fls" || s == "-fprintf":
			if i+1 < len(args) {
				note(v.writesTo("find "+s, args[i+1].str()))
			} else {
				note(fmt.Sprintf("find %s writes a file", s))
			}
			i++
			if s == "-fprintf" {
				i++
			}
		default:
			note(fmt.Sprintf("find %s is not one of the tests and actions that only look", s))
		}
	}
	return reason
}
