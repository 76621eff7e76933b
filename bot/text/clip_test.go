package text

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	tests := []struct {
		name  string
		s     string
		n     int
		bytes string // ClipBytes(s, n)
		runes string // ClipRunes(s, n)
	}{
		{"fits", "short", 5, "short", "short"},
		{"cut", "abcdefgh", 6, "abc…", "abcde…"},
		{"space before the cut", "ab cdefgh", 6, "ab…", "ab cd…"},
		{"multibyte", "ééééé", 7, "éé…", "ééééé"},
		{"multibyte cut", "éééééé", 5, "é…", "éééé…"},
		{"no room", "abcdef", 2, "", "a…"},
		{"zero", "abc", 0, "", ""},
		{"combining mark stays with its letter", "ae\u0301e\u0301e\u0301", 5, "a…", "ae\u0301…"},
		{"emoji with skin tone", "a👍🏽b", 9, "a…", "a👍🏽b"},
		{"zwj sequence", "x👩\u200d💻yz", 12, "x…", "x👩\u200d💻yz"},
		{"empty", "", 3, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClipBytes(tt.s, tt.n); got != tt.bytes {
				t.Errorf("ClipBytes(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.bytes)
			}
			if got := ClipRunes(tt.s, tt.n); got != tt.runes {
				t.Errorf("ClipRunes(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.runes)
			}
		})
	}
}

func TestCutRunesKeepsGraphemes(t *testing.T) {
	s := "e\u0301\u0302x"
	for n := 1; n <= 2; n++ {
		if i := CutRunes(s, n); i != 0 {
			t.Errorf("CutRunes(%q, %d) = %d, want 0: the marks belong to the e", s, n, i)
		}
	}
	if i := CutRunes(s, 3); i != len(s)-1 {
		t.Errorf("CutRunes(%q, 3) = %d, want %d", s, i, len(s)-1)
	}
}

func FuzzClip(f *testing.F) {
	for _, s := range []string{"hello world", "ééé", "a\u0301\u0301", "👩\u200d💻", "\xff\xfe", strings.Repeat("x ", 50)} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = min(max(n, -1), 2*len(s)+2)
		for _, c := range []struct {
			name string
			clip func(string, int) string
			len  func(string) int
		}{
			{"ClipBytes", ClipBytes, func(s string) int { return len(s) }},
			{"ClipRunes", ClipRunes, utf8.RuneCountInString},
		} {
			got := c.clip(s, n)
			if c.len(got) > max(n, 0) {
				t.Fatalf("%s(%q, %d) = %q: longer than %d", c.name, s, n, got, n)
			}
			if utf8.ValidString(s) && !utf8.ValidString(got) {
				t.Fatalf("%s(%q, %d) = %q: invalid UTF-8", c.name, s, n, got)
			}
			if c.len(s) <= n && got != s {
				t.Fatalf("%s(%q, %d) = %q: changed a text that fits", c.name, s, n, got)
			}
			if got != s && got != "" && !strings.HasPrefix(s, strings.TrimSuffix(got, Ellipsis)) {
				t.Fatalf("%s(%q, %d) = %q: not a start of the text", c.name, s, n, got)
			}
		}
	})
}
