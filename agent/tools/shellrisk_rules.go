package tools

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/loopbot/loopbot/agent"
)

// This file is the read-only allowlist: the programs a command line may run without asking,
// and what each of them may be given. A program is listed only when it writes nothing but its
// standard output once its options are checked, and a check refuses every option known to
// write a file, run a program or read without end.

// rule is what one listed program may be given.
type rule struct {
	// anyArgs: the program opens no file it is given and no option of it writes, runs a
	// program or prints without bound, so arguments computed at run time and patterns are
	// fine.
	anyArgs bool
	// globs: relative patterns are fine: they expand to names in the workspace, and none of
	// the program's options that such a name could spell does harm.
	globs bool
	// check judges the arguments and returns why they need approval, or "". It may raise
	// the verdict further itself (a write outside the workspace is dangerous).
	check func(v *verdict, args []arg, depth int) string
}

// readOnlyPrograms is the allowlist, built when a command is first judged rather than at
// every start; it is set in init because the find and env rules judge the commands they run
// through argv, which reads it.
var readOnlyPrograms func() map[string]rule

func init() { readOnlyPrograms = sync.OnceValue(readOnlyRules) }

func readOnlyRules() map[string]rule {
	free := rule{anyArgs: true}
	reader := rule{globs: true}
	return map[string]rule{
		"echo": free, "true": free, "false": free, ":": free, "test": free, "[": free, "basename": free,
		"dirname": free, "whoami": free, "id": free, "groups": free, "uname": free, "nproc": free, "sleep": free,
		"expr": free, "exit": free, "break": free, "continue": free, "shift": free, "printenv": free,
		"which": free, "type": free, "pwd": free, "uptime": free,
		"printf": {anyArgs: true, check: printfRule},
		"cd":     {anyArgs: true, check: cdRule},
		"set":    {anyArgs: true, check: setRule},

		"cat": reader, "head": reader, "tail": reader, "wc": reader, "nl": reader, "tac": reader, "rev": reader,
		"fold": reader, "cut": reader, "paste": reader, "join": reader, "expand": reader, "unexpand": reader,
		"column": reader, "comm": reader, "cmp": reader, "diff": reader, "md5sum": reader, "sha1sum": reader,
		"sha224sum": reader, "sha256sum": reader, "sha384sum": reader, "sha512sum": reader, "b2sum": reader,
		"cksum": reader, "od": reader, "hexdump": reader, "strings": reader, "du": reader, "df": reader,
		"stat": reader, "ls": reader, "tr": reader, "realpath": reader, "readlink": reader,
		"grep":  {globs: true, check: refuse("grep -D and --devices can read devices without end", "D", "efmABC", "devices")},
		"egrep": {globs: true, check: refuse("grep -D and --devices can read devices without end", "D", "efmABC", "devices")},
		"fgrep": {globs: true, check: refuse("grep -D and --devices can read devices without end", "D", "efmABC", "devices")},
		"file":  {globs: true, check: refuse("file -C writes a compiled magic file", "C", "efmFP", "compile")},
		"tree":  {globs: true, check: refuse("tree -o and -R write files", "oR", "LPI")},

		"rg":       {check: refuse("rg --pre and --hostname-bin run a program", "", "", "pre", "hostname-bin")},
		"date":     {check: refuse("date -s sets the clock", "s", "dfIr", "set")},
		"hostname": {check: hostnameRule},
		"env":      {check: envRule},
		"sort":     {check: sortRule},
		"uniq":     {check: uniqRule},
		"xxd":      {check: xxdRule},
		"tee":      {check: teeRule},
		"seq":      {check: seqRule},
		"sed":      {check: sedRule},
		"find":     {check: findRule},
		"git":      {check: gitRule},
	}
}

// allowed judges a call of a listed program: it runs without asking unless an argument or
// the program's own rule says otherwise.
func (v *verdict) allowed(base string, r rule, args []arg, depth int) {
	for _, a := range args {
		reason := ""
		switch {
		case r.anyArgs:
		case a.dyn:
			reason = fmt.Sprintf("%s gets an argument computed at run time", base)
		case a.glob && !inWorkspace(a.s):
			reason = fmt.Sprintf("%s gets the pattern %s, which may match outside the workspace", base, a.s)
		case a.glob && !r.globs:
			reason = fmt.Sprintf("%s gets the pattern %s, which may expand to one of its options", base, a.s)
		case touchesDevice(a.s):
			reason = fmt.Sprintf("%s reads %s, a device or kernel file that may never end", base, a.s)
		}
		if reason == "" && !a.dyn && hugeField(a.s) {
			reason = fmt.Sprintf("%s is asked for an output field a million characters wide", base)
		}
		if reason != "" {
			v.raise(agent.RiskConfirm, "%s", reason)
			break
		}
	}
	if r.check != nil {
		if reason := r.check(v, args, depth); reason != "" {
			v.raise(agent.RiskConfirm, "%s", reason)
		}
	}
}

// hugeField reports a format asking for a field of seven digits or more (printf '%9999999d',
// date +%9999999Y, git log --format='%<(9999999)'): a few bytes of command line that print
// without bound.
func hugeField(s string) bool {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return false
	}
	run := 0
	for _, c := range s[i:] {
		if c >= '0' && c <= '9' {
			if run++; run >= 7 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// longName returns the name of a long option (--name or --name=value), or "".
func longName(s string) string {
	if !strings.HasPrefix(s, "--") || s == "--" {
		return ""
	}
	n := s[2:]
	if i := strings.IndexByte(n, '='); i >= 0 {
		n = n[:i]
	}
	return n
}

// abbreviates reports whether a long option given as name selects the option full: GNU
// getopt_long and git accept any unambiguous prefix, so --compress-prog is
// --compress-program.
func abbreviates(name, full string) bool {
	return name != "" && strings.HasPrefix(full, name)
}

// shortOption reports an argument that is a group of short options (-abc), not a long
// option, "-" or a negative number.
func shortOption(s string) bool {
	if len(s) < 2 || s[0] != '-' || s[1] == '-' {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err != nil
}

// refuse returns a check refusing the short option letters in shorts (alone or in a group,
// up to a letter of valued, whose value takes the rest of the group) and the long options
// longs (or an abbreviation of them), up to "--". The reason is reported for either.
func refuse(reason, shorts, valued string, longs ...string) func(*verdict, []arg, int) string {
	return func(_ *verdict, args []arg, _ int) string {
		for _, a := range args {
			if a.s == "--" {
				return ""
			}
			if n := longName(a.s); n != "" {
				for _, l := range longs {
					if abbreviates(n, l) {
						return reason
					}
				}
				continue
			}
			if !shortOption(a.s) {
				continue
			}
			for _, c := range a.s[1:] {
				if strings.ContainsRune(shorts, c) {
					return reason
				}
				if strings.ContainsRune(valued, c) {
					break
				}
			}
		}
		return ""
	}
}

// optionValue returns the value of the option at args[i]: attached after "=" (long) or after
// the letter at position at (short), or else the next argument.
func optionValue(args []arg, i, at int) (string, bool) {
	s := args[i].s
	if strings.HasPrefix(s, "--") {
		if j := strings.IndexByte(s, '='); j >= 0 {
			return s[j+1:], true
		}
	} else if at+1 < len(s) {
		return s[at+1:], true
	}
	if i+1 < len(args) {
		return args[i+1].str(), true
	}
	return "", false
}

// writesTo judges a file a listed program would write: inside the workspace it needs
// approval; outside it is dangerous.
func (v *verdict) writesTo(prog, target string) string {
	if v.outside(target) {
		v.raise(agent.RiskDangerous, "%s writes %s, outside the workspace", prog, printable(target))
	}
	return fmt.Sprintf("%s writes the file %s", prog, printable(target))
}

// operands returns the arguments that are not options, skipping the values of the short
// options in valued (given apart, as in -f 2) and of the long options in valuedLong.
func operands(args []arg, valued string, valuedLong ...string) []arg {
	var out []arg
	for i := 0; i < len(args); i++ {
		s := args[i].s
		switch {
		case s == "--":
			return append(out, args[i+1:]...)
		case longName(s) != "":
			n := longName(s)
			for _, l := range valuedLong {
				if abbreviates(n, l) && !strings.Contains(s, "=") {
					i++
				}
			}
		case shortOption(s):
			if last := s[len(s)-1:]; strings.Contains(valued, last) && strings.IndexAny(s[1:], valued) == len(s)-2 {
				i++
			}
		default:
			out = append(out, args[i])
		}
	}
	return out
}

func printfRule(_ *verdict, args []arg, _ int) string {
	if len(args) == 0 {
		return ""
	}
	f := args[0]
	if f.s == "--" && len(args) > 1 {
		f = args[1]
	}
	switch {
	case strings.HasPrefix(f.s, "-v"):
		return "printf -v sets a variable"
	case f.dyn:
		return "printf's format is computed at run time"
	case strings.Contains(f.s, "*"):
		return "printf takes a field width from its arguments"
	}
	return ""
}

// cdRule lets cd move down within the workspace. Once a cd may have left it, every relative
// path the rest of the line writes counts as outside. A cd back up (cd ..) is not let through
// even after a cd down: whether that one ran (in a subshell, after ||) is not known here.
func cdRule(v *verdict, args []arg, _ int) string {
	var ops []arg
	for _, a := range args {
		if !a.dyn && (a.s == "-L" || a.s == "-P") {
			continue
		}
		ops = append(ops, a)
	}
	if len(ops) == 0 {
		return "" // HOME is the workspace
	}
	o := ops[0]
	if len(ops) == 1 && !o.dyn && !o.glob && !v.leftWorkspace && (o.s == "-" || (inWorkspace(o.s) && !strings.HasPrefix(o.s, "-"))) {
		return ""
	}
	v.leftWorkspace = true
	return "cd may leave the workspace"
}

var setOptions = nameSet{"errexit", "nounset", "xtrace", "verbose", "pipefail", "noclobber", "noglob"}

// setRule lets set switch error handling and tracing, and set the positional parameters.
func setRule(_ *verdict, args []arg, _ int) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a.s == "--" && !a.dyn:
			return ""
		case a.dyn:
			return "set gets an argument computed at run time"
		case a.s == "-o" || a.s == "+o":
			if i+1 < len(args) && !args[i+1].dyn && setOptions.has(args[i+1].s) {
				i++
				continue
			}
			return "set -o may change how commands run"
		case len(a.s) > 1 && (a.s[0] == '-' || a.s[0] == '+') && strings.Trim(a.s[1:], "euxvfC") == "":
		default:
			return fmt.Sprintf("set %s may change how commands run", a.s)
		}
	}
	return ""
}

var hostnameFlags = nameSet{"-s", "--short", "-f", "--fqdn", "--long", "-i", "--ip-address", "-I", "--all-ip-addresses",
	"-d", "--domain", "-A", "--all-fqdns", "-a", "--alias"}

// hostnameRule lets hostname print names; with an operand or -F it sets them.
func hostnameRule(_ *verdict, args []arg, _ int) string {
	for _, a := range args {
		if !hostnameFlags.has(a.s) {
			return "hostname with arguments may set the host name"
		}
	}
	return ""
}

// envRule lets env print the environment: with arguments it runs a command (env -S hides a
// whole command line) or changes the environment of one.
func envRule(v *verdict, args []arg, depth int) string {
	if len(args) == 0 {
		return ""
	}
	v.wrapper("env", args, depth)
	return "env with arguments runs a command or changes its environment"
}

// sortRule refuses -o/--output (writes a file) and --compress-program (runs a program).
func sortRule(v *verdict, args []arg, _ int) string {
	reason := ""
	note := func(r string) {
		if reason == "" {
			reason = r
		}
	}
	for i, a := range args {
		if a.s == "--" {
			break
		}
		if n := longName(a.s); n != "" {
			switch {
			case abbreviates(n, "compress-program") && abbreviates(n, "check"):
				note("sort option --" + n + " is ambiguous")
			case abbreviates(n, "compress-program"):
				note("sort --compress-program runs a program")
			case abbreviates(n, "output"):
				target, _ := optionValue(args, i, 0)
				note(v.writesTo("sort --output", target))
			}
			continue
		}
		if shortOption(a.s) {
			if at := strings.IndexByte(a.s, 'o'); at > 0 {
				target, _ := optionValue(args, i, at)
				note(v.writesTo("sort -o", target))
			}
		}
	}
	return reason
}

// uniqRule refuses a second operand, the file uniq writes.
func uniqRule(v *verdict, args []arg, _ int) string {
	ops := operands(args, "fsw", "skip-fields", "skip-chars", "check-chars", "group", "all-repeated")
	if len(ops) > 1 {
		return v.writesTo("uniq", ops[1].str())
	}
	return ""
}

// xxdRule refuses a second operand, the file xxd writes.
func xxdRule(v *verdict, args []arg, _ int) string {
	var ops []arg
	valued := nameSet{"-c", "-cols", "-g", "-groupsize", "-l", "-len", "-o", "-offset", "-s", "-seek", "-n", "-name"}
	for i := 0; i < len(args); i++ {
		s := args[i].s
		switch {
		case valued.has(s):
			i++
		case s == "-":
			ops = append(ops, args[i])
		case strings.HasPrefix(s, "-"):
		default:
			ops = append(ops, args[i])
		}
	}
	if len(ops) > 1 {
		return v.writesTo("xxd", ops[1].str())
	}
	return ""
}

// teeRule lets tee copy its input to standard output; the files it is given are written.
func teeRule(v *verdict, args []arg, _ int) string {
	reason := ""
	for _, o := range operands(args, "") {
		if r := v.writesTo("tee", o.str()); reason == "" {
			reason = r
		}
	}
	return reason
}

// seqRule lets seq print at most a million numbers.
func seqRule(_ *verdict, args []arg, _ int) string {
	var nums []float64
	for i := 0; i < len(args); i++ {
		s := args[i].s
		if s == "-f" || s == "-s" || s == "--format" || s == "--separator" {
			i++
			continue
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && strings.HasPrefix(s, "-") {
			continue // an option such as -w or -f%g
		}
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprintf("seq gets %s, which is not a finite number", s)
		}
		nums = append(nums, f)
	}
	first, step, last := 1.0, 1.0, 0.0
	switch len(nums) {
	case 1:
		last = nums[0]
	case 2:
		first, last = nums[0], nums[1]
	case 3:
		first, step, last = nums[0], nums[1], nums[2]
	default:
		return "seq needs one to three numbers"
	}
	if step == 0 {
		return "seq with a step of 0 never ends"
	}
	if n := (last - first) / step; math.IsNaN(n) || n > 1e6 {
		return "seq would print more than a million numbers"
	}
	return ""
}
