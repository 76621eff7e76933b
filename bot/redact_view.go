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
// text (bold, strike, code, spoiler), besides Discord's "__" underline. Written inside a
// token they vanish when rendered and join its parts again. A single underscore is part of
// many tokens and identifiers, and no renderer makes emphasis of one inside a word, so it
// stays.
const emphasis = "*~`|"

// views returns the views worth scanning besides the original: the text without invisible
// characters, bytes that are not UTF-8 and emphasis markers, when it has any.
func views(s string) []view {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c < ' ' && c != '\n' && c != '\t' && c != '\r' || c == 0x7f ||
			strings.IndexByte(emphasis, c) >= 0 || c == '_' && i+1 < len(s) && s[i+1] == '_' {
			return []view{strip(s)}
		}
	}
	return nil
}

// strip returns s without invisible characters, bytes that are not UTF-8, emphasis markers
// and double underscores.
func strip(s string) view {
	var b strings.Builder
	b.Grow(len(s))
	orig := make([]int32, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '_' && i+1 < len(s) && s[i+1] == '_':
				i += 2
			case strings.IndexByte(emphasis, c) >= 0, c < ' ' && c != '\n' && c != '\t' && c != '\r', c == 0x7f:
				i++
			default:
				b.WriteByte(c)
				orig = append(orig, int32(i))
				i++
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || invisible(r) {
			i += n
			continue
		}
		b.WriteString(s[i : i+n])
		for j := range n {
			orig = append(orig, int32(i+j))
		}
		i += n
	}
	return view{text: b.String(), orig: orig}
}
