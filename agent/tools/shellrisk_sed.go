package tools

import (
	"fmt"
	"strings"
)

// sed may edit files in place (-i), read its script from a file (-f), and its scripts may
// write files (w, W, s///w), read them (r, R) or run commands (e, s///e). sedRule lets it
// through only with options that do none of that and scripts made of the commands that only
// edit the stream.

var (
	sedLong    = []string{"quiet", "silent", "regexp-extended", "separate", "unbuffered", "null-data", "zero-terminated", "posix", "debug", "sandbox", "expression", "line-length"}
	sedRefused = []string{"in-place", "file", "follow-symlinks", "help", "version"}
)

func sedRule(v *verdict, args []arg, _ int) string {
	reason := ""
	note := func(r string) {
		if reason == "" {
			reason = r
		}
	}
	var scripts, files []string
	inPlace := false
	for i := 0; i < len(args); i++ {
		s := args[i].s
		if s == "--" {
			files = append(files, strs(args[i+1:])...)
			break
		}
		if n := longName(s); n != "" {
			switch {
			case abbreviates(n, "expression") || abbreviates(n, "line-length"):
				value, ok := optionValue(args, i, 0)
				if !strings.Contains(s, "=") {
					i++
				}
				if ok && abbreviates(n, "expression") {
					scripts = append(scripts, value)
				}
			case refusedLong(n, sedRefused):
				inPlace = inPlace || abbreviates(n, "in-place")
				note(fmt.Sprintf("sed --%s edits files in place or reads its script from a file", n))
			case refusedLong(n, sedLong):
			default:
				note(fmt.Sprintf("sed --%s is not an option known to be harmless", n))
			}
			continue
		}
		if !shortOption(s) {
			files = append(files, s)
			continue
		}
	letters:
		for j := 1; j < len(s); j++ {
			switch c := s[j]; {
			case c == 'e' || c == 'l':
				value, ok := optionValue(args, i, j)
				if j+1 >= len(s) {
					i++
				}
				if ok && c == 'e' {
					scripts = append(scripts, value)
				}
				break letters
			case c == 'i':
				inPlace = true // the files are judged as written below
				break letters
			case c == 'f':
				note("sed -f reads its script from a file")
				if j+1 >= len(s) {
					i++
				}
				break letters
			case strings.IndexByte("nErsuz", c) < 0:
				note(fmt.Sprintf("sed -%c is not an option known to be harmless", c))
			}
		}
	}
	if len(scripts) == 0 && len(files) > 0 {
		scripts, files = files[:1], files[1:]
	}
	for _, sc := range scripts {
		if r := sedScriptRefusal(sc); r != "" {
			note(r)
		}
	}
	if inPlace {
		for _, f := range files {
			note(v.writesTo("sed -i", f))
		}
	}
	return reason
}

// refusedLong reports whether the long option name selects one of names.
func refusedLong(name string, names []string) bool {
	for _, n := range names {
		if abbreviates(name, n) {
			return true
		}
	}
	return false
}

// sedScriptRefusal reads a sed script and says why it needs approval: a command that reads
// or writes a file or runs one, or a script it cannot read. It returns "" for a script made
// only of commands that edit the stream.
func sedScriptRefusal(s string) string {
	const unreadable = "the sed script could not be read to check it"
	if s == dynamic {
		return "the sed script is computed at run time"
	}
	i, n := 0, len(s)
	space := func() {
		for i < n && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	// part reads up to and past the closing delimiter d.
	part := func(d byte) bool {
		for i < n {
			c := s[i]
			switch {
			case c == '\\':
				i += 2
				continue
			case c == '\n':
				return false
			}
			i++
			if c == d {
				return true
			}
		}
		return false
	}
	address := func() bool {
		space()
		if i >= n {
			return true
		}
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			for i < n && (s[i] >= '0' && s[i] <= '9' || s[i] == '~') {
				i++
			}
		case c == '$':
			i++
		case c == '/' || c == '\\':
			if c == '\\' {
				if i+1 >= n {
					return false
				}
				i++
			}
			d := s[i]
			i++
			if !part(d) {
				return false
			}
			for i < n && (s[i] == 'I' || s[i] == 'M') {
				i++
			}
		}
		return true
	}
	for i < n {
		for i < n && strings.IndexByte(" \t\n;", s[i]) >= 0 {
			i++
		}
		if i >= n {
			break
		}
		if s[i] == '#' {
			for i < n && s[i] != '\n' {
				i++
			}
			continue
		}
		if !address() {
			return unreadable
		}
		space()
		if i < n && s[i] == ',' {
			i++
			space()
			if i < n && (s[i] == '+' || s[i] == '~') {
				i++
			}
			if !address() {
				return unreadable
			}
		}
		space()
		for i < n && s[i] == '!' {
			i++
			space()
		}
		if i >= n {
			return unreadable
		}
		c := s[i]
		i++
		switch {
		case c == '{':
			continue
		case c == '}':
		case strings.IndexByte("=dDgGhHlnNpPqQxzF", c) >= 0:
			space()
			for i < n && s[i] >= '0' && s[i] <= '9' {
				i++
			}
		case c == ':' || c == 'b' || c == 't' || c == 'T':
			// A label ends at a newline or, in GNU sed, a semicolon; stopping at either
			// never hides a command.
			for i < n && s[i] != '\n' && s[i] != ';' {
				i++
			}
		case c == 'a' || c == 'i' || c == 'c':
			// Text to the end of the line; a backslash continues it.
			for i < n && s[i] != '\n' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
		case c == 's' || c == 'y':
			if i >= n || s[i] == '\\' || s[i] == '\n' {
				return unreadable
			}
			d := s[i]
			i++
			for range 2 { // the pattern and the replacement
				if !part(d) {
					return unreadable
				}
			}
			if c == 's' {
				for i < n && strings.IndexByte("gpiImM0123456789", s[i]) >= 0 {
					i++
				}
				if i < n && (s[i] == 'w' || s[i] == 'W' || s[i] == 'e') {
					return fmt.Sprintf("sed s///%c writes a file or runs a command", s[i])
				}
			}
		default:
			return fmt.Sprintf("the sed command %c may read or write a file or run a command", c)
		}
		space()
		if i < n && strings.IndexByte(";\n}#", s[i]) < 0 {
			return unreadable
		}
	}
	return ""
}
