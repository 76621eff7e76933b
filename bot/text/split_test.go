package text

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		limit int
		want  []string
	}{
		{"fits", "short", 100, []string{"short"}},
		{"blank", " \n\n ", 1, nil},
		{"paragraphs", "aaaa\n\nbbbb\n\ncccc", 40, []string{"aaaa\n\nbbbb\n\ncccc"}},
		{"paragraph boundary", strings.Repeat("a", 30) + "\n\n" + strings.Repeat("b", 30), 60, []string{strings.Repeat("a", 30), strings.Repeat("b", 30)}},
		{"line boundary", strings.Repeat("a", 30) + "\n" + strings.Repeat("b", 30), 60, []string{strings.Repeat("a", 30), strings.Repeat("b", 30)}},
		{"space", strings.Repeat("word ", 12), 40, []string{strings.TrimSpace(strings.Repeat("word ", 7)), strings.TrimSpace(strings.Repeat("word ", 5))}},
		{"inside a line, on runes", strings.Repeat("é", 40), 50, []string{strings.Repeat("é", 22), strings.Repeat("é", 18)}},
		{"fence reopened with its language", "```go\n" + strings.Repeat("x\n", 30) + "```", 50, []string{
			"```go\n" + strings.Repeat("x\n", 19) + "```",
			"```go\n" + strings.Repeat("x\n", 11) + "```",
		}},
		{"cut at the closing fence", "```\n" + strings.Repeat("y", 30) + "\n```\n" + strings.Repeat("z", 30), 41, []string{
			"```\n" + strings.Repeat("y", 30) + "\n```",
			strings.Repeat("z", 30),
		}},
		{"blank lines at the end of a block", "```\n" + strings.Repeat("y", 30) + "\n\n\n\n```\n" + strings.Repeat("z", 30), 40, []string{
			"```\n" + strings.Repeat("y", 30) + "\n```",
			strings.Repeat("z", 30),
		}},
		{"long opening line", "```" + strings.Repeat("l", 20) + "\n" + strings.Repeat("c", 60) + "\n```", 40, []string{
			"```\n" + strings.Repeat("c", 31) + "\n```",
			"```\n" + strings.Repeat("c", 29) + "\n```",
		}},
		{"one-line code is not cut", strings.Repeat("a", 20) + "\n```" + strings.Repeat("b", 20) + "```", 40, []string{
			strings.Repeat("a", 20),
			"```" + strings.Repeat("b", 20) + "```",
		}},
		{"one-line code longer than a part", "```" + strings.Repeat("0", 40) + "```", 44, []string{
			"```\n" + strings.Repeat("0", 36) + "\n```",
			"0000```",
		}},
		{"no empty block before a fence", strings.Repeat("a", 30) + "\n```\n" + strings.Repeat("c", 20) + "\n```", 42, []string{
			strings.Repeat("a", 30),
			"```\n" + strings.Repeat("c", 20) + "\n```",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.text, tt.limit)
			checkParts(t, got, tt.limit, Bytes)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Split:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// slackAtom is an atom rule like the Slack adapter's: an entity or a <link>.
func slackAtom(s string, i int) int {
	for j := i - 1; j >= 0 && j >= i-len("&amp;"); j-- {
		if s[j] == ';' {
			break
		}
		if s[j] == '&' {
			return j
		}
	}
	for j := i - 1; j >= 0; j-- {
		switch s[j] {
		case '>':
			return -1
		case '<':
			return j
		}
	}
	return -1
}

func TestSplitterRunesAndAtoms(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
	}{
		{"entities", strings.Repeat("&amp;", 100), 23},
		{"link", "see " + strings.Repeat("w ", 10) + "<https://example.com/very/long/path|the link text> after", 60},
		{"fence", "```\n" + strings.Repeat("line\n", 30) + "```", 40},
		{"no spaces", strings.Repeat("x", 95), 20},
		{"unicode", strings.Repeat("ü日本🙂 ", 40), 17},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := Splitter{Max: tt.n, Unit: Runes, Atom: slackAtom}.Split(tt.in)
			checkParts(t, parts, tt.n, Runes)
			var joined strings.Builder
			for _, c := range parts {
				if i, j := strings.LastIndex(c, "&"), strings.LastIndex(c, ";"); i > j {
					t.Errorf("cut entity in %q", c)
				}
				if i, j := strings.LastIndex(c, "<"), strings.LastIndex(c, ">"); i > j {
					t.Errorf("cut link in %q", c)
				}
				joined.WriteString(c)
			}
			strip := func(s string) string { return strings.Join(strings.Fields(strings.ReplaceAll(s, Fence, "")), "") }
			if strip(joined.String()) != strip(tt.in) {
				t.Errorf("text lost or changed:\n got %q\nwant %q", joined.String(), tt.in)
			}
		})
	}
}

// checkParts fails the test if a part is over the limit, splits a character, leaves a code
// block open or is empty.
func checkParts(t *testing.T, parts []string, limit int, u Unit) {
	t.Helper()
	for _, p := range parts {
		if u.Len(p) > limit {
			t.Errorf("part of %d > %d: %q", u.Len(p), limit, p)
		}
		if !utf8.ValidString(p) {
			t.Errorf("part splits a character: %q", p)
		}
		if open := fenceOpen(p); open {
			t.Errorf("part leaves a code block open: %q", p)
		}
		if strings.TrimSpace(p) == "" {
			t.Errorf("empty part in %q", parts)
		}
	}
}

// fenceOpen reports whether s ends inside a code block, by the same line rule as fences.
func fenceOpen(s string) bool {
	bs := fences(s)
	return len(bs) > 0 && bs[len(bs)-1].end == len(s) && !strings.HasSuffix(strings.TrimSpace(s[bs[len(bs)-1].open:]), "\n"+Fence)
}

func FuzzSplit(f *testing.F) {
	f.Add("```go\n"+strings.Repeat("x\n", 30)+"```\n\ntext", 50, false)
	f.Add(strings.Repeat("&amp; <https://a.example|a> ", 20), 40, true)
	f.Add("a\u0301\u0301\u0301 ü日本🙂\n\n```\n```\n```py", 32, true)
	f.Fuzz(func(t *testing.T, s string, limit int, runes bool) {
		if !utf8.ValidString(s) {
			return
		}
		limit = 32 + abs(limit)%2000
		p := Splitter{Max: limit}
		if runes {
			p.Unit, p.Atom = Runes, slackAtom
		}
		parts := p.Split(s)
		if fenceOpen(s) {
			// A text that leaves a block open leaves it open in its last part too.
			if len(parts) > 0 {
				parts = parts[:len(parts)-1]
			}
		}
		checkParts(t, parts, limit, p.Unit)
		if strings.TrimSpace(s) != "" && len(parts) == 0 && !fenceOpen(s) {
			t.Fatalf("no parts for %q", s)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
