package text

import (
	"strings"
	"unicode/utf8"
)

// Unit is what a length limit counts.
type Unit int

// The units of a limit.
const (
	Bytes Unit = iota // bytes: never more than characters by any count
	Runes             // Unicode code points
)

// Len is the length of s in u.
func (u Unit) Len(s string) int {
	if u == Runes {
		return utf8.RuneCountInString(s)
	}
	return len(s)
}

// cut is CutBytes or CutRunes.
func (u Unit) cut(s string, n int) int {
	if u == Runes {
		return CutRunes(s, n)
	}
	return CutBytes(s, n)
}

// Fence opens and closes a code block in every Markdown dialect loopbot writes.
const Fence = "```"

// maxOpener bounds the fence line that reopens a code block in the next part ("```" and a
// language name); a longer language name is left out.
const maxOpener = 16

// A Splitter cuts a text too long for one message into parts that each fit. It cuts at a
// paragraph break in the back half of the room where it can, else at a line break, else at
// a space there, else at the last line break or space at all; a word is cut, between two
// characters, only when it fills the room alone. A code block
// cut in two is closed at the end of one part and opened again, language and all, at the
// start of the next, so every part renders on its own.
type Splitter struct {
	Max  int  // the most a part may hold; at least 32 for parts to keep within it
	Unit Unit // what Max counts

	// Atom, if set, keeps the platform's own syntax whole: it returns the index at which
	// an atom (an entity, a link) open at byte i of s starts, or -1 if none is. A cut is
	// moved back to that start.
	Atom func(s string, i int) int
}

// Split cuts s into parts of at most max bytes; see Splitter.
func Split(s string, max int) []string { return Splitter{Max: max}.Split(s) }

// Split cuts s into parts. Text that fits is returned as it is; text that is only white
// space gives no part. Parts are trimmed of the white space at the cut.
func (p Splitter) Split(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	if p.Unit.Len(s) <= p.Max {
		return []string{s}
	}
	blocks := fences(s)
	var parts []string
	add := func(part string) {
		part = strings.TrimRight(part, " \t\n")
		if t := strings.TrimSpace(part); t != "" && !isEmptyBlock(t) {
			parts = append(parts, part)
		}
	}
	pos, reopen := 0, ""
	var cur *block // the block reopened at pos, if any
	for pos < len(s) {
		if cur != nil && pos >= cur.end {
			// Only blank lines were left of the block: it was closed already.
			pos, reopen, cur = cur.after, "", nil
			continue
		}
		prefix := ""
		if reopen != "" {
			prefix = reopen + "\n"
		}
		room := p.Max - p.Unit.Len(prefix)
		if p.Unit.Len(s[pos:]) <= room {
			add(prefix + s[pos:])
			break
		}
		// Keep room to close a code block the cut may fall in, and to break a line of
		// ```code``` after its fence.
		room = max(room-len("\n\n"+Fence), 1)
		i := pos + p.cutPoint(s[pos:], room)
		i = outOfFenceLine(s, blocks, pos, i)
		b := blockAt(blocks, i)
		switch {
		case b == nil:
			part := prefix + s[pos:i]
			if bs := fences(part); len(bs) > 0 && bs[len(bs)-1].end == len(part) {
				// A line of ```code``` longer than a part, cut: its start would open a
				// block, so it is made one, its text on a line of its own.
				open := bs[len(bs)-1].open
				k := open + strings.Index(part[open:], Fence) + len(Fence)
				part = part[:k] + "\n" + strings.TrimRight(part[k:], " \t\n") + "\n" + Fence
			}
			add(part)
			reopen, cur = "", nil
		case i == b.end:
			// The cut is at the block's own closing line: close it here and skip that line.
			add(strings.TrimRight(prefix+s[pos:i], " \t\n") + "\n" + Fence)
			i, reopen, cur = b.after, "", nil
		default:
			add(strings.TrimRight(prefix+s[pos:i], " \t\n") + "\n" + Fence)
			reopen, cur = b.opener, b
		}
		pos = i
		for pos < len(s) && s[pos] == '\n' {
			pos++
		}
	}
	return parts
}

// isEmptyBlock reports a part that would show only an empty code block: one cut just
// after an opening fence line too long to move the cut before it.
func isEmptyBlock(t string) bool {
	open, rest, ok := strings.Cut(t, "\n")
	return ok && strings.HasPrefix(open, Fence) && !strings.Contains(open[len(Fence):], Fence) && strings.TrimSpace(rest) == Fence
}

// cutPoint returns where to cut s so that s[:i] holds at most room units: at a separator
// near the end of the room if there is one, never inside an atom if that can be helped. It
// returns at least one rune for a non-empty s.
func (p Splitter) cutPoint(s string, room int) int {
	i := p.Unit.cut(s, room)
	if i >= len(s) {
		return len(s)
	}
	if p.Atom != nil {
		if j := p.Atom(s, i); j > 0 {
			i = j
		}
	}
	// A break in the back half of the room, the strongest first; else any line break or
	// space, so that a word is cut only when it fills the room on its own.
	for _, try := range []struct {
		sep   string
		floor int
	}{{"\n\n", i / 2}, {"\n", i / 2}, {" ", i / 2}, {"\n", 1}, {" ", 1}} {
		for k := strings.LastIndex(s[:i], try.sep); k >= try.floor && k > 0; k = strings.LastIndex(s[:k], try.sep) {
			if p.Atom == nil || p.Atom(s, k) < 0 {
				return k + len(try.sep)
			}
		}
	}
	if i == 0 {
		_, size := utf8.DecodeRuneInString(s)
		return size
	}
	return i
}

// block is one fenced code block of a text, by byte offsets: its opening line starts at
// open, its content at body, its closing line at end (len of the text if it has none) and
// what follows it at after.
type block struct {
	open, body, end, after int
	opener                 string // the fence line that reopens it: ``` and its language
}

// fences finds the code blocks of s. A line whose text starts with ``` opens a block,
// unless it also closes it (```code```); the next such line closes it.
func fences(s string) []block {
	var bs []block
	var cur *block
	for start := 0; start < len(s); {
		end := strings.IndexByte(s[start:], '\n')
		next := len(s)
		if end < 0 {
			end = len(s)
		} else {
			end += start
			next = end + 1
		}
		t := strings.TrimSpace(s[start:end])
		if strings.HasPrefix(t, Fence) {
			switch {
			case cur != nil:
				cur.end, cur.after = start, next
				bs = append(bs, *cur)
				cur = nil
			case !strings.Contains(t[len(Fence):], Fence):
				cur = &block{open: start, body: next, opener: opener(t)}
			}
		}
		start = next
	}
	if cur != nil {
		cur.end, cur.after = len(s), len(s)
		bs = append(bs, *cur)
	}
	return bs
}

// opener is the fence line that reopens a block opened by line t: the fence and the
// language name, if the name is one short word.
func opener(t string) string {
	lang := strings.TrimLeft(t, "`")
	if f := strings.Fields(lang); len(f) > 0 && len(Fence)+len(f[0]) <= maxOpener && !strings.Contains(f[0], "`") {
		return Fence + f[0]
	}
	return Fence
}

// blockAt returns the block that the cut i falls in (after the start of its opening line,
// up to the start of its closing line), or nil. A cut inside the opening line itself is
// left there only when that line is longer than a part.
func blockAt(bs []block, i int) *block {
	for k := range bs {
		if b := &bs[k]; b.open < i && i <= b.end {
			return b
		}
	}
	return nil
}

// outOfFenceLine moves a cut that falls inside a fence line (a line of ```code``` too),
// or just after an opening one, to the start of that line, so that no part ends with half a fence or an empty block;
// unless that start is not after pos, where the part would be empty.
func outOfFenceLine(s string, bs []block, pos, i int) int {
	for _, b := range bs {
		inOpener := b.open < i && i <= b.body
		inCloser := b.end < i && i < b.after
		switch {
		case inOpener && b.open > pos:
			return b.open
		case inCloser && b.end > pos:
			return b.end
		}
	}
	// A line of ```code```, which opens no block, is not cut either if it can be helped.
	start := strings.LastIndexByte(s[:i], '\n') + 1
	end := strings.IndexByte(s[i:], '\n')
	if end < 0 {
		end = len(s) - i
	}
	if start > pos && strings.HasPrefix(strings.TrimSpace(s[start:i+end]), Fence) {
		return start
	}
	return i
}
