package web

import (
	"html"
	"net/url"
	"regexp"
	"strings"
)

// Markdown from the model is turned into a small allowlist of HTML elements: p, br, strong,
// em, code, pre, ul, ol, li, and a with an http or https href. The renderer never copies
// input into the output unescaped: it emits its own tags and escapes all text, so anything
// it does not understand shows as the characters that were sent.

// maxInlineDepth bounds nested emphasis, so hostile input cannot make rendering recurse
// deeply.
const maxInlineDepth = 6

// maxLinkLabel and maxLinkURL bound how far a link is looked for, in bytes, so that text
// full of brackets renders in linear time.
const (
	maxLinkLabel = 500
	maxLinkURL   = 2048
)

var (
	fenceRe    = regexp.MustCompile("^ {0,3}(```+|~~~+)")
	bulletRe   = regexp.MustCompile(`^ {0,3}[-*+][ \t]+(.*)$`)
	orderedRe  = regexp.MustCompile(`^ {0,3}[0-9]{1,9}[.)][ \t]+(.*)$`)
	headingRe  = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$`)
	indentedRe = regexp.MustCompile(`^( {2,}|\t)\S`)
)

// renderMarkdown renders src to safe HTML.
func renderMarkdown(src string) string {
	lines := strings.Split(strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n"), "\n")
	var b strings.Builder
	var para []string
	list := ""        // "ul" or "ol" while a list is open
	var item []string // the open list item's lines
	flushPara := func() {
		if len(para) == 0 {
			return
		}
		b.WriteString("<p>")
		for i, l := range para {
			if i > 0 {
				b.WriteString("<br>")
			}
			b.WriteString(renderInline(strings.TrimSpace(l), 0))
		}
		b.WriteString("</p>\n")
		para = nil
	}
	flushItem := func() {
		if item == nil {
			return
		}
		b.WriteString("<li>")
		for i, l := range item {
			if i > 0 {
				b.WriteString("<br>")
			}
			b.WriteString(renderInline(strings.TrimSpace(l), 0))
		}
		b.WriteString("</li>\n")
		item = nil
	}
	closeList := func() {
		flushItem()
		if list != "" {
			b.WriteString("</" + list + ">\n")
			list = ""
		}
	}
	openItem := func(kind, text string) {
		flushPara()
		if list != kind {
			closeList()
			b.WriteString("<" + kind + ">\n")
			list = kind
		}
		flushItem()
		item = []string{text}
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fenceRe.FindStringSubmatch(line); m != nil {
			flushPara()
			closeList()
			fence := m[1]
			var code []string
			for i++; i < len(lines); i++ {
				if strings.HasPrefix(strings.TrimLeft(lines[i], " "), fence[:3]) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(lines[i]), fence[:1])) == "" {
					break
				}
				code = append(code, lines[i])
			}
			b.WriteString("<pre><code>")
			b.WriteString(escapeText(strings.Join(code, "\n")))
			b.WriteString("</code></pre>\n")
			continue
		}
		if strings.TrimSpace(line) == "" {
			flushPara()
			closeList()
			continue
		}
		if m := bulletRe.FindStringSubmatch(line); m != nil {
			openItem("ul", m[1])
			continue
		}
		if m := orderedRe.FindStringSubmatch(line); m != nil {
			openItem("ol", m[1])
			continue
		}
		if item != nil && indentedRe.MatchString(line) {
			item = append(item, line)
			continue
		}
		closeList()
		if m := headingRe.FindStringSubmatch(line); m != nil {
			flushPara()
			b.WriteString("<p><strong>" + renderInline(m[1], maxInlineDepth) + "</strong></p>\n")
			continue
		}
		para = append(para, line)
	}
	flushPara()
	closeList()
	return b.String()
}

// renderInline renders code spans, links and emphasis in one line. depth counts the
// emphasis it is nested in; past maxInlineDepth only code spans and text are recognised.
func renderInline(s string, depth int) string {
	var b strings.Builder
	text := 0 // start of the text not yet written
	// A delimiter with no closer after some index has none after any later index either:
	// remembering that keeps rendering linear on input full of unmatched delimiters.
	noCloser := map[string]int{}
	flush := func(end int) {
		b.WriteString(escapeText(s[text:end]))
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte("\\`*_[]()#+-.!<>", s[i+1]) >= 0:
			flush(i)
			b.WriteString(escapeText(s[i+1 : i+2]))
			i += 2
			text = i
			continue
		case c == '`':
			n := runLen(s, i, '`')
			delim := s[i : i+n]
			end := -1
			if from, ok := noCloser[delim]; !ok || i+n < from {
				if end = strings.Index(s[i+n:], delim); end < 0 {
					noCloser[delim] = i + n
				}
			}
			if end >= 0 {
				flush(i)
				b.WriteString("<code>" + escapeText(strings.TrimSpace(s[i+n:i+n+end])) + "</code>")
				i += n + end + n
				text = i
				continue
			}
			i += n
			continue
		case c == '[' && depth < maxInlineDepth:
			if label, href, n, ok := parseLink(s[i:]); ok {
				flush(i)
				if u, ok := safeURL(href); ok {
					b.WriteString(`<a href="` + escapeText(u) + `" rel="noopener nofollow" target="_blank">` + renderInline(label, maxInlineDepth) + "</a>")
				} else {
					// Not a link we allow: show what was written, as text.
					b.WriteString(escapeText(s[i : i+n]))
				}
				i += n
				text = i
				continue
			}
		case (c == '*' || c == '_') && depth < maxInlineDepth:
			n := min(runLen(s, i, c), 2)
			key := s[i : i+n]
			inner, end, ok := "", 0, false
			if from, seen := noCloser[key]; canOpen(s, i, c, n) && (!seen || i+n+1 < from) {
				if inner, end, ok = findCloser(s, i+n, c, n); !ok {
					noCloser[key] = i + n + 1
				}
			}
			if ok {
				flush(i)
				tag := "em"
				if n == 2 {
					tag = "strong"
				}
				b.WriteString("<" + tag + ">" + renderInline(inner, depth+1) + "</" + tag + ">")
				i = end
				text = i
				continue
			}
			i += runLen(s, i, c)
			continue
		}
		i++
	}
	flush(len(s))
	return b.String()
}

// runLen counts the bytes equal to c from s[i].
func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// canOpen reports whether n times c at s[i] can open emphasis: the content must not start
// with a space, and an underscore must start a word, so that snake_case_names stay as
// written.
func canOpen(s string, i int, c byte, n int) bool {
	start := i + n
	if start >= len(s) || s[start] == ' ' || s[start] == c {
		return false
	}
	return c != '_' || i == 0 || !isWordByte(s[i-1])
}

// findCloser finds the closer of an emphasis whose content starts at s[start]: n times c,
// not after a space, not part of a longer run, and for underscores at the end of a word. It
// returns the content and the index after the closer.
func findCloser(s string, start int, c byte, n int) (string, int, bool) {
	delim := strings.Repeat(string(c), n)
	for j := start + 1; j+n <= len(s); j++ {
		if s[j:j+n] != delim || s[j-1] == ' ' {
			continue
		}
		if j+n < len(s) && s[j+n] == c {
			continue // part of a longer run
		}
		if c == '_' && j+n < len(s) && isWordByte(s[j+n]) {
			continue
		}
		return s[start:j], j + n, true
	}
	return "", 0, false
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b >= 0x80
}

// parseLink parses [label](href) at the start of s and returns its length in bytes.
func parseLink(s string) (label, href string, n int, ok bool) {
	depth := 0
	close := -1
	for i := 1; i < len(s) && i <= maxLinkLabel; i++ {
		if s[i] == '[' {
			depth++
		} else if s[i] == ']' {
			if depth == 0 {
				close = i
				break
			}
			depth--
		}
	}
	if close < 0 || close+1 >= len(s) || s[close+1] != '(' {
		return "", "", 0, false
	}
	end := strings.IndexByte(s[close+2:], ')')
	if end < 0 || end > maxLinkURL {
		return "", "", 0, false
	}
	href = strings.TrimSpace(s[close+2 : close+2+end])
	return s[1:close], href, close + 2 + end + 1, true
}

// safeURL returns href if it is an absolute http or https URL with a host, normalised as
// net/url writes it.
func safeURL(href string) (string, bool) {
	if href == "" || strings.ContainsFunc(href, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", false
	}
	u, err := url.Parse(href)
	if err != nil || u.Host == "" || u.User != nil {
		return "", false
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return "", false
	}
	return u.String(), true
}

// escapeText escapes s for HTML text and attribute values. It also breaks up
// "javascript:" (in any case) so that not even the text of a message spells a script URL;
// the browser shows the entity &#58; as the colon it is.
func escapeText(s string) string {
	e := html.EscapeString(s)
	lower := asciiLower(e)
	if !strings.Contains(lower, "script:") {
		return e
	}
	var b strings.Builder
	last := 0
	for i := 0; ; {
		j := strings.Index(lower[i:], "script:")
		if j < 0 {
			break
		}
		colon := i + j + len("script")
		b.WriteString(e[last:colon])
		b.WriteString("&#58;")
		last = colon + 1
		i = colon + 1
	}
	b.WriteString(e[last:])
	return b.String()
}

// asciiLower lowercases ASCII letters only, so that byte offsets stay valid in s (unlike
// strings.ToLower, which rewrites invalid UTF-8).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
