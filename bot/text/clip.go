package text

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Ellipsis marks where a clipped text was cut.
const Ellipsis = "…"

// ClipBytes returns s if it is at most n bytes long, or else its start cut to at most n
// bytes in all, Ellipsis included. The cut never splits a UTF-8 sequence nor separates a
// character from the combining marks, joiners or variation selectors that follow it, and
// white space before the ellipsis is dropped. n below the ellipsis's three bytes gives "".
func ClipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < len(Ellipsis) {
		return ""
	}
	return clipAt(s, CutBytes(s, n-len(Ellipsis)))
}

// ClipRunes is ClipBytes with n counting runes (Unicode code points) instead of bytes.
func ClipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n < 1 {
		return ""
	}
	return clipAt(s, CutRunes(s, n-1))
}

func clipAt(s string, i int) string {
	return strings.TrimRightFunc(s[:i], unicode.IsSpace) + Ellipsis
}

// CutBytes returns the largest index i <= n at which s can be cut: s[:i] has at most n
// bytes, and the cut splits no UTF-8 sequence and leaves no combining mark, joiner or
// variation selector apart from the character before it. It may return 0.
func CutBytes(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	if n <= 0 {
		return 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return graphemeStart(s, n)
}

// CutRunes is CutBytes with n counting runes.
func CutRunes(s string, n int) int {
	if n <= 0 {
		return 0
	}
	i := 0
	for range n {
		if i >= len(s) {
			return len(s)
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if i >= len(s) {
		return len(s)
	}
	return graphemeStart(s, i)
}

// graphemeStart moves the rune boundary i back until the rune at i starts a new character
// rather than extending the one before it.
func graphemeStart(s string, i int) int {
	for i > 0 && i < len(s) {
		r, _ := utf8.DecodeRuneInString(s[i:])
		prev, size := utf8.DecodeLastRuneInString(s[:i])
		if !extends(r) && prev != zwj {
			return i
		}
		i -= size
	}
	return i
}

// zwj joins two emoji into one (a family, a profession).
const zwj = '\u200D'

// extends reports whether r belongs to the character before it: a combining mark, a
// joiner, a variation selector or an emoji skin tone modifier.
func extends(r rune) bool {
	switch {
	case r == zwj, r == '\u200C':
		return true
	case r >= '\uFE00' && r <= '\uFE0F', r >= 0xE0100 && r <= 0xE01EF:
		return true
	case r >= 0x1F3FB && r <= 0x1F3FF:
		return true
	}
	return unicode.Is(unicode.M, r)
}
