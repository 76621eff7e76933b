package text

import "strings"

// SpanKind says what a Span is.
type SpanKind int

// The kinds of span.
const (
	Plain    SpanKind = iota // text
	Code                     // `code`
	Strong                   // **strong** or __strong__
	Emphasis                 // *emphasis* or _emphasis_
	Strike                   // ~~struck out~~
	Link                     // [label](url)
)

// A Span is one piece of a line of Markdown.
type Span struct {
	Kind SpanKind
	// Text is a plain span's text with backslash escapes resolved, a code span's code
	// without the white space around it, or a link's URL as written.
	Text string
	// Raw is the span's source, as written: a renderer that keeps the writer's syntax, or
	// shows a link it does not allow as text, writes it.
	Raw string
	// Delim is the delimiter as written: the backticks of a code span, ** __ * _ or ~~.
	Delim string
	// Children are the content of Strong, Emphasis and Strike, and a link's label.
	Children []Span
}

// Nesting is bounded without a counter: an emphasis ends at the first closer of its kind,
// so it cannot hold another of its kind, and a link cannot hold a link. Five kinds of
// emphasis (* ** _ __ ~~) and a link make at most maxInlineDepth levels of recursion.
const maxInlineDepth = 6

// maxLinkLabel and maxLinkURL bound how far a link is looked for, in bytes, so that text
// full of brackets parses in linear time.
const (
	maxLinkLabel = 500
	maxLinkURL   = 2048
)

// escapable is what a backslash escapes.
const escapable = "\\`*_[]()#+-.!<>~"

// ParseInline splits one line (or a few, joined) of Markdown into spans: code spans,
// emphasis, strike-through, links, and the text between them. Adjacent text is one span.
func ParseInline(s string) []Span { return parseInline(s, false) }

func parseInline(s string, inLink bool) []Span {
	var out []Span
	text := 0 // start of the text not yet emitted
	emit := func(end int) {
		if end > text {
			out = appendPlain(out, s[text:end], s[text:end])
		}
	}
	// A delimiter with no closer after some index has none after any later index either:
	// remembering that keeps parsing linear on input full of unmatched delimiters.
	noCloser := map[string]int{}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte(escapable, s[i+1]) >= 0:
			emit(i)
			out = appendPlain(out, s[i+1:i+2], s[i:i+2])
			i += 2
			text = i
			continue
		case c == '`':
			// A run of backticks without a closer has no later run of its length either
			// (that would have closed it), so each length is looked for once at most.
			n := runLen(s, i, '`')
			delim := s[i : i+n]
			if end := strings.Index(s[i+n:], delim); end >= 0 {
				emit(i)
				raw := s[i : i+n+end+n]
				out = append(out, Span{Kind: Code, Text: strings.TrimSpace(s[i+n : i+n+end]), Raw: raw, Delim: delim})
				i += len(raw)
				text = i
				continue
			}
			i += n
			continue
		case c == '[' && !inLink:
			if label, href, n, ok := parseLink(s[i:]); ok {
				emit(i)
				out = append(out, Span{Kind: Link, Text: href, Raw: s[i : i+n], Children: parseInline(label, true)})
				i += n
				text = i
				continue
			}
		case c == '*' || c == '_' || c == '~':
			n := min(runLen(s, i, c), 2)
			if c == '~' && n != 2 {
				i += runLen(s, i, c)
				continue
			}
			key := s[i : i+n]
			inner, end, ok := "", 0, false
			if from, seen := noCloser[key]; canOpen(s, i, c, n) && (!seen || i+n+1 < from) {
				if inner, end, ok = findCloser(s, i+n, c, n); !ok {
					noCloser[key] = i + n + 1
				}
			}
			if ok {
				emit(i)
				kind := Emphasis
				switch {
				case c == '~':
					kind = Strike
				case n == 2:
					kind = Strong
				}
				out = append(out, Span{Kind: kind, Raw: s[i:end], Delim: key, Children: parseInline(inner, inLink)})
				i = end
				text = i
				continue
			}
			i += runLen(s, i, c)
			continue
		}
		i++
	}
	emit(len(s))
	return out
}

// appendPlain adds text to spans, joining it to a plain span before it.
func appendPlain(spans []Span, text, raw string) []Span {
	if k := len(spans) - 1; k >= 0 && spans[k].Kind == Plain {
		spans[k].Text += text
		spans[k].Raw += raw
		return spans
	}
	return append(spans, Span{Kind: Plain, Text: text, Raw: raw})
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
// not after a space, not part of a longer run (so * never closes on half of a **), and for underscores at the end of a word. It
// returns the content and the index after the closer.
func findCloser(s string, start int, c byte, n int) (string, int, bool) {
	delim := strings.Repeat(string(c), n)
	for j := start + 1; j+n <= len(s); j++ {
		if s[j:j+n] != delim || s[j-1] == ' ' {
			continue
		}
		if s[j-1] == c || j+n < len(s) && s[j+n] == c {
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
	end := -1
	for i := 1; i < len(s) && i <= maxLinkLabel; i++ {
		if s[i] == '[' {
			depth++
		} else if s[i] == ']' {
			if depth == 0 {
				end = i
				break
			}
			depth--
		}
	}
	if end < 0 || end+1 >= len(s) || s[end+1] != '(' {
		return "", "", 0, false
	}
	close := strings.IndexByte(s[end+2:min(len(s), end+2+maxLinkURL+1)], ')')
	if close < 0 {
		return "", "", 0, false
	}
	href = strings.TrimSpace(s[end+2 : end+2+close])
	return s[1:end], href, end + 2 + close + 1, true
}
