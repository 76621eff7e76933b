package text

import (
	"strings"
)

// The Markdown a model writes is read here once, into blocks and spans, and each adapter
// walks them to write its platform's syntax. The tokenizer never fails: what it does not
// recognise is text. It keeps to time linear in its input (emphasis nests at most
// maxInlineDepth deep, a delimiter without a closer is not looked for twice, a link is
// looked for within bounded lengths), since the text may come from anyone.

// BlockKind says what a Block is.
type BlockKind int

// The kinds of block.
const (
	Blank     BlockKind = iota // a line of white space
	Paragraph                  // lines of text
	Heading                    // # a heading
	ListItem                   // - an item, or 1. an item
	Quote                      // > quoted lines
	CodeBlock                  // a fenced code block
)

// A Block is one block of a Markdown text. Every line of the text belongs to one block, in
// order, so a renderer that keeps line breaks can keep them all.
type Block struct {
	Kind BlockKind
	// Lines are the block's lines without their markers, inline Markdown still in them: a
	// paragraph's; a heading's one line, trailing #s removed; a list item's first line and
	// the indented lines that continue it, with their indentation; a quote's; a code
	// block's, exactly as written. A blank block's one line is as written.
	Lines  []string
	Level  int    // a heading's level, 1 to 6
	Indent string // a list item's indentation, as written
	Marker string // a list item's marker: -, * or +, or a number and . or )
	Fence  string // a code block's opening fence: three or more ` or ~
	Lang   string // a code block's language: the first word after its fence
	Open   bool   // a code block that the text ends in without closing it
}

// Ordered reports whether b is an item of a numbered list.
func (b Block) Ordered() bool {
	return b.Kind == ListItem && b.Marker != "" && b.Marker[0] >= '0' && b.Marker[0] <= '9'
}

// ParseBlocks splits Markdown into blocks. Line endings may be \n, \r\n or \r.
func ParseBlocks(src string) []Block {
	src = strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n")
	lines := strings.Split(src, "\n")
	var bs []Block
	last := func() *Block {
		if len(bs) == 0 {
			return nil
		}
		return &bs[len(bs)-1]
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if fence, lang, ok := openingFence(line); ok {
			b := Block{Kind: CodeBlock, Fence: fence, Lang: lang, Open: true}
			for i++; i < len(lines); i++ {
				if closesFence(lines[i], fence) {
					b.Open = false
					break
				}
				b.Lines = append(b.Lines, lines[i])
			}
			bs = append(bs, b)
			continue
		}
		if strings.TrimSpace(line) == "" {
			bs = append(bs, Block{Kind: Blank, Lines: []string{line}})
			continue
		}
		if b, ok := listItem(line); ok {
			bs = append(bs, b)
			continue
		}
		prev := last()
		if prev != nil && prev.Kind == ListItem && isIndented(line) {
			prev.Lines = append(prev.Lines, line)
			continue
		}
		if level, text, ok := heading(line); ok {
			bs = append(bs, Block{Kind: Heading, Level: level, Lines: []string{text}})
			continue
		}
		if text, ok := quoteLine(line); ok {
			if prev != nil && prev.Kind == Quote {
				prev.Lines = append(prev.Lines, text)
			} else {
				bs = append(bs, Block{Kind: Quote, Lines: []string{text}})
			}
			continue
		}
		if prev != nil && prev.Kind == Paragraph {
			prev.Lines = append(prev.Lines, line)
			continue
		}
		bs = append(bs, Block{Kind: Paragraph, Lines: []string{line}})
	}
	return bs
}

// openingFence reports whether line opens a code block: indentation, then three or more
// backticks or tildes, then a language; a backtick fence's language has no backtick, or
// ```code``` on one line would open a block.
func openingFence(line string) (fence, lang string, ok bool) {
	t := strings.TrimLeft(line, " \t")
	if len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return "", "", false
	}
	n := runLen(t, 0, t[0])
	if n < 3 {
		return "", "", false
	}
	info := t[n:]
	if t[0] == '`' && strings.IndexByte(info, '`') >= 0 {
		return "", "", false
	}
	if f := strings.Fields(info); len(f) > 0 {
		lang = f[0]
	}
	return t[:n], lang, true
}

// closesFence reports whether line closes a block opened by fence: as many or more of the
// same character and nothing else.
func closesFence(line, fence string) bool {
	t := strings.TrimSpace(line)
	return len(t) >= len(fence) && strings.Trim(t, fence[:1]) == ""
}

func listItem(line string) (Block, bool) {
	body := strings.TrimLeft(line, " \t")
	indent := line[:len(line)-len(body)]
	n := 0
	switch {
	case body == "":
		return Block{}, false
	case body[0] == '-' || body[0] == '*' || body[0] == '+':
		n = 1
	default:
		for n < len(body) && n < 9 && body[n] >= '0' && body[n] <= '9' {
			n++
		}
		if n == 0 || n == len(body) || (body[n] != '.' && body[n] != ')') {
			return Block{}, false
		}
		n++
	}
	if n >= len(body) || (body[n] != ' ' && body[n] != '\t') {
		return Block{}, false
	}
	text := strings.TrimLeft(body[n:], " \t")
	if text == "" {
		return Block{}, false
	}
	return Block{Kind: ListItem, Indent: indent, Marker: body[:n], Lines: []string{text}}, true
}

// isIndented reports a line that continues a list item: two spaces or a tab in.
func isIndented(line string) bool {
	return strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "\t")
}

// heading parses an ATX heading: up to three spaces, one to six #, a space, the text,
// optionally closed by #s.
func heading(line string) (int, string, bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return 0, "", false
	}
	n := runLen(t, 0, '#')
	if n == 0 || n > 6 || n == len(t) || (t[n] != ' ' && t[n] != '\t') {
		return 0, "", false
	}
	text := strings.TrimSpace(t[n:])
	text = strings.TrimSpace(strings.TrimRight(text, "#"))
	return n, text, true
}

// quoteLine parses "> text".
func quoteLine(line string) (string, bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || !strings.HasPrefix(t, ">") {
		return "", false
	}
	return strings.TrimPrefix(t[1:], " "), true
}

// runLen counts the bytes equal to c from s[i].
func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}
