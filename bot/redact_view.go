package bot

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// A view is text with some characters left out, and for every byte it keeps, the offset of
// that byte in the original text. Secrets are looked for in views too, so a token split by
// an invisible character or by Markdown emphasis markers is found, and the range found maps
// back to the original with what was left out inside it.
type view struct {
	text string
	// orig[i] is the offset in the original of the view's byte i; nil for the original.
	orig []int32
}

// span is a byte range [start, end) of the original text.
type span struct{ start, end int }

// toOriginal maps a non-empty range of the view to the original.
func (v *view) toOriginal(s span) span {
	if v.orig == nil {
		return s
	}
	return span{int(v.orig[s.start]), int(v.orig[s.end-1]) + 1}
}

// invisible reports whether c shows as nothing: zero-width spaces and joiners, the word
// joiner, byte order marks, soft hyphens, bidirectional controls and other format
// characters, variation selectors, fillers and control characters other than white space.
// Put inside a token, such a character hides it from a pattern and not from a reader.
func invisible(c rune) bool {
	switch {
	case c == '\n' || c == '\t' || c == '\r' || c == ' ':
		return false
	case unicode.Is(unicode.Cf, c), unicode.Is(unicode.Cc, c):
		return true
	case c == '\u034f', c >= '\ufe00' && c <= '\ufe0f', c >= '\U000e0100' && c <= '\U000e01ef':
		return true
	case c == '\u115f', c == '\u1160', c == '\u3164', c == '\uffa0', c == '\u180e':
		return true
	}
	return false
}

// emphasis are the characters Slack's mrkdwn, Discord's and common Markdown use to mark up
// text (bold, strike, code, spoiler). Written inside a token they vanish when rendered and
// join its parts again. The underscore is left to underscoreView, since it is part of many
// tokens.
const emphasis = "*~`|"

// views returns the views worth scanning besides the original: without invisible characters
// and emphasis markers, and without underscores as well. A view that would equal another is
// left out.
func views(s string) []view {
	hasMark, hasUnder := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf, c < ' ' && c != '\n' && c != '\t' && c != '\r', c == 0x7f, strings.IndexByte(emphasis, c) >= 0:
			hasMark = true
		case c == '_':
			hasUnder = true
		}
	}
	var out []view
	if hasMark {
		if v, ok := strip(s, false); ok {
			out = append(out, v)
		}
	}
	if hasUnder {
		if v, ok := strip(s, true); ok {
			out = append(out, v)
		}
	}
	return out
}

// strip returns s without invisible characters and emphasis markers, and without
// underscores when under is set; ok is false when nothing was left out.
func strip(s string, under bool) (v view, ok bool) {
	var b strings.Builder
	b.Grow(len(s))
	orig := make([]int32, 0, len(s))
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		if invisible(c) || (c < utf8.RuneSelf && strings.IndexByte(emphasis, byte(c)) >= 0) || (under && c == '_') {
			ok = true
			i += n
			continue
		}
		b.WriteString(s[i : i+n])
		for j := range n {
			orig = append(orig, int32(i+j))
		}
		i += n
	}
	return view{text: b.String(), orig: orig}, ok
}
