package text

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseBlocks(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Block
	}{
		{"paragraph and blank", "one\ntwo\n\nthree", []Block{
			{Kind: Paragraph, Lines: []string{"one", "two"}},
			{Kind: Blank, Lines: []string{""}},
			{Kind: Paragraph, Lines: []string{"three"}},
		}},
		{"heading", "## Result ##", []Block{{Kind: Heading, Level: 2, Lines: []string{"Result"}}}},
		{"not a heading", "#hashtag and ####### seven", []Block{{Kind: Paragraph, Lines: []string{"#hashtag and ####### seven"}}}},
		{"list with continuation", "- one\n  more\n  * two\n3) three", []Block{
			{Kind: ListItem, Marker: "-", Lines: []string{"one", "  more"}},
			{Kind: ListItem, Indent: "  ", Marker: "*", Lines: []string{"two"}},
			{Kind: ListItem, Marker: "3)", Lines: []string{"three"}},
		}},
		{"not a list", "-not\n2.0 is a version\n*", []Block{{Kind: Paragraph, Lines: []string{"-not", "2.0 is a version", "*"}}}},
		{"quote", "> a\n>b\ntext", []Block{
			{Kind: Quote, Lines: []string{"a", "b"}},
			{Kind: Paragraph, Lines: []string{"text"}},
		}},
		{"code", "```go extra\nx := 1\n\n```\nafter", []Block{
			{Kind: CodeBlock, Fence: "```", Lang: "go", Lines: []string{"x := 1", ""}},
			{Kind: Paragraph, Lines: []string{"after"}},
		}},
		{"tilde fence closed only by tildes", "~~~~\n```\n~~~~~", []Block{{Kind: CodeBlock, Fence: "~~~~", Lines: []string{"```"}}}},
		{"open code", "  ```\nrest", []Block{{Kind: CodeBlock, Fence: "```", Lines: []string{"rest"}, Open: true}}},
		{"one-line code is a paragraph", "```x```", []Block{{Kind: Paragraph, Lines: []string{"```x```"}}}},
		{"line endings", "a\r\nb\rc", []Block{{Kind: Paragraph, Lines: []string{"a", "b", "c"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseBlocks(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseBlocks(%q)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestOrdered(t *testing.T) {
	bs := ParseBlocks("1. a\n- b")
	if !bs[0].Ordered() || bs[1].Ordered() {
		t.Errorf("Ordered: %+v", bs)
	}
}

// show writes spans in a compact form for comparison: kind(content).
func show(spans []Span) string {
	var b strings.Builder
	for _, sp := range spans {
		switch sp.Kind {
		case Plain:
			b.WriteString(sp.Text)
		case Code:
			b.WriteString("code(" + sp.Text + ")")
		case Strong:
			b.WriteString("strong(" + show(sp.Children) + ")")
		case Emphasis:
			b.WriteString("em(" + show(sp.Children) + ")")
		case Strike:
			b.WriteString("strike(" + show(sp.Children) + ")")
		case Link:
			b.WriteString("link(" + show(sp.Children) + "|" + sp.Text + ")")
		}
	}
	return b.String()
}

func TestParseInline(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"**bold** *em* _em_ __bold__ ~~gone~~", "strong(bold) em(em) em(em) strong(bold) strike(gone)"},
		{"read_file_now and 2 * 3 * 4 and ~single~", "read_file_now and 2 * 3 * 4 and ~single~"},
		{"file_name_ ends a word", "file_name_ ends a word"},
		{"[a](" + strings.Repeat("x", maxLinkURL+1) + ")", "[a](" + strings.Repeat("x", maxLinkURL+1) + ")"},
		{"`*x*` and `` a`b ``", "code(*x*) and code(a`b)"},
		{"odd ` tick", "odd ` tick"},
		{`\*not em\* \q`, `*not em* \q`},
		{"[the **docs**](https://e.com/a?b=1) [x](javascript:y)", "link(the strong(docs)|https://e.com/a?b=1) link(x|javascript:y)"},
		{"[[nested]](u) [no [link](v)](w)", "link([nested]|u) link(no [link](v)|w)"},
		{"**a *b* c** and **unclosed", "strong(a em(b) c) and **unclosed"},
		{strings.Repeat("*a ", 5), strings.TrimSpace(strings.Repeat("*a ", 5)) + " "},
	}
	for _, tt := range tests {
		got := ParseInline(tt.in)
		if s := show(got); s != tt.want {
			t.Errorf("ParseInline(%q) = %s, want %s", tt.in, s, tt.want)
		}
		if r := rawOf(got); r != tt.in {
			t.Errorf("ParseInline(%q): the spans' Raw is %q", tt.in, r)
		}
	}
}

func TestParseInlineDepth(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		// The deepest nesting there is: a link around all five kinds of emphasis.
		{"[*a **b _c __d ~~e~~ d__ c_ b** a*](https://e.com)", maxInlineDepth},
		{strings.Repeat("**a *b ", 40) + strings.Repeat(" b* a**", 40), 2},
		{strings.Repeat("_x", 20) + strings.Repeat("x_", 20), 1},
	}
	for _, tt := range tests {
		if d := depth(ParseInline(tt.in)); d != tt.want {
			t.Errorf("ParseInline(%.40q...) nests %d deep, want %d", tt.in, d, tt.want)
		}
	}
}

// TestParseInlineLinear parses texts full of delimiters that never close. Each takes
// milliseconds; were every opener to look for its closer again, each would take minutes,
// so the generous bound cannot be missed by a slow machine and cannot be met by a
// quadratic parser.
func TestParseInlineLinear(t *testing.T) {
	for _, unit := range []string{"*a ", "_a ", "**a ", "~~a ", "[a](b "} {
		s := strings.Repeat(unit, 300_000/len(unit))
		done := make(chan struct{})
		go func() {
			ParseInline(s)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("ParseInline of %d bytes of %q took over 10 s", len(s), unit)
		}
	}
}

func depth(spans []Span) int {
	d := 0
	for _, sp := range spans {
		if sp.Children != nil {
			d = max(d, 1+depth(sp.Children))
		}
	}
	return d
}

func rawOf(spans []Span) string {
	var b strings.Builder
	for _, sp := range spans {
		b.WriteString(sp.Raw)
	}
	return b.String()
}

// lineCount is how many source lines blocks account for.
func lineCount(bs []Block) int {
	n := 0
	for _, b := range bs {
		n += len(b.Lines)
		if b.Kind == CodeBlock {
			n++ // the opening fence
			if !b.Open {
				n++
			}
		}
	}
	return n
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{
		"# T\n**a** *b* `c` [d](https://e.com) ~~f~~\n- x\n  y\n1. z\n> q\n```go\ncode\n```\n~~~\nt",
		"***__**_*_~~~~", "[[[]]](((", "\\*\\`", "``` `\n````", strings.Repeat("[a](", 100),
		strings.Repeat("*_~", 200), "é*ü*\u0301",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		bs := ParseBlocks(s)
		norm := strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
		if want := strings.Count(norm, "\n") + 1; lineCount(bs) != want {
			t.Fatalf("%d lines in blocks, %d in %q", lineCount(bs), want, s)
		}
		for _, b := range bs {
			if b.Kind == CodeBlock {
				continue
			}
			for _, l := range b.Lines {
				spans := ParseInline(l)
				if r := rawOf(spans); r != l {
					t.Fatalf("ParseInline(%q) lost text: %q", l, r)
				}
				if depth(spans) > maxInlineDepth {
					t.Fatalf("ParseInline(%q) nests %d deep", l, depth(spans))
				}
				if utf8.ValidString(l) {
					checkValid(t, spans)
				}
			}
		}
	})
}

// checkValid fails if a span of valid input holds invalid UTF-8: a cut inside a character.
func checkValid(t *testing.T, spans []Span) {
	t.Helper()
	for _, sp := range spans {
		if !utf8.ValidString(sp.Text) || !utf8.ValidString(sp.Raw) {
			t.Fatalf("span %+v splits a character", sp)
		}
		checkValid(t, sp.Children)
	}
}
