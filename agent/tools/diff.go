package tools

import (
	"fmt"
	"strings"
)

// A unified diff of two texts, line by line, for the approval card of a write that replaces
// a file: a person approves a change better when they see what it changes. Lines common to
// both ends are set aside first; what is left is compared with the longest common
// subsequence, whose table is bounded by maxDiffCells, so a huge or wholly rewritten file
// costs a summary line, not the daemon's memory.

// Bounds of a diff.
const (
	// maxDiffCells bounds the comparison table (lines changed in the old text times lines
	// changed in the new): 4 MiB of int32.
	maxDiffCells = 1 << 20
	// diffContext is how many unchanged lines surround each change.
	diffContext = 3
)

// diffOp is one line of the comparison: kept (' '), removed ('-') or added ('+'), with its
// line numbers in the old and new text (1-based; 0 where the line is not in that text).
type diffOp struct {
	kind       byte
	line       string
	aLine, bLn int
}

// unifiedDiff returns the unified diff of old and new, named name, with diffContext lines of
// context, cut to maxBytes with the cut said; "" when they are equal. ok is false when the
// texts differ in too many lines to compare within maxDiffCells.
func unifiedDiff(name, old, new string, maxBytes int) (out string, ok bool) {
	if old == new {
		return "", true
	}
	a, b := diffLines(old), diffLines(new)
	ops, ok := diffOps(a, b)
	if !ok {
		return "", false
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s (now)\n+++ %s (after this call)\n", name, name)
	for _, h := range hunks(ops) {
		sb.WriteString(h)
	}
	out = sb.String()
	if len(out) > maxBytes {
		cut := strings.LastIndexByte(out[:maxBytes], '\n') + 1
		rest := strings.Count(out[cut:], "\n")
		out = out[:cut] + fmt.Sprintf("(diff cut: %d more lines)\n", rest)
	}
	return strings.TrimSuffix(out, "\n"), true
}

// diffLines splits text into lines without their line breaks; a last line without a break
// is a line too.
func diffLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// diffOps compares a and b line by line.
func diffOps(a, b []string) ([]diffOp, bool) {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	am, bm := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(am), len(bm)
	if (n+1)*(m+1) > maxDiffCells {
		return nil, false
	}
	// lcs[i*(m+1)+j] is the length of the longest common subsequence of am[i:] and bm[j:].
	lcs := make([]int32, (n+1)*(m+1))
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case am[i] == bm[j]:
				lcs[i*(m+1)+j] = lcs[(i+1)*(m+1)+j+1] + 1
			case lcs[(i+1)*(m+1)+j] >= lcs[i*(m+1)+j+1]:
				lcs[i*(m+1)+j] = lcs[(i+1)*(m+1)+j]
			default:
				lcs[i*(m+1)+j] = lcs[i*(m+1)+j+1]
			}
		}
	}
	ops := make([]diffOp, 0, len(a)+len(b))
	ai, bi := 0, 0 // lines of a and b taken so far
	keep := func() { ops = append(ops, diffOp{' ', a[ai], ai + 1, bi + 1}); ai++; bi++ }
	for range pre {
		keep()
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && am[i] == bm[j]:
			keep()
			i++
			j++
		case i < n && (j == m || lcs[(i+1)*(m+1)+j] >= lcs[i*(m+1)+j+1]):
			ops = append(ops, diffOp{'-', am[i], ai + 1, 0})
			ai++
			i++
		default:
			ops = append(ops, diffOp{'+', bm[j], 0, bi + 1})
			bi++
			j++
		}
	}
	for range suf {
		keep()
	}
	return ops, true
}

// hunks groups the changes of ops with their context into unified-diff hunks.
func hunks(ops []diffOp) []string {
	var out []string
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-diffContext)
		// Extend over changes separated by at most twice the context.
		end := i
		for k := i; k < len(ops); k++ {
			if ops[k].kind != ' ' {
				end = k
			} else if k-end > 2*diffContext {
				break
			}
		}
		stop := min(len(ops), end+diffContext+1)
		out = append(out, hunk(ops[start:stop]))
		i = stop
	}
	return out
}

// hunk writes one hunk: its header and lines.
func hunk(ops []diffOp) string {
	var aStart, bStart, aCount, bCount int
	var body strings.Builder
	for _, op := range ops {
		if op.kind != '+' {
			if aStart == 0 {
				aStart = op.aLine
			}
			aCount++
		}
		if op.kind != '-' {
			if bStart == 0 {
				bStart = op.bLn
			}
			bCount++
		}
		body.WriteByte(op.kind)
		body.WriteString(op.line + "\n")
	}
	// A side with no lines in the hunk is numbered by the line before it, as diff does.
	if aCount == 0 {
		aStart = linesBefore(ops, true)
	}
	if bCount == 0 {
		bStart = linesBefore(ops, false)
	}
	return fmt.Sprintf("@@ -%s +%s @@\n", hunkRange(aStart, aCount), hunkRange(bStart, bCount)) + body.String()
}

// linesBefore is the number of the line before a hunk that has none of that side: the
// other side's first line number minus one, which is where the empty side stands.
func linesBefore(ops []diffOp, oldSide bool) int {
	for _, op := range ops {
		if oldSide && op.kind == '+' {
			return op.bLn - 1
		}
		if !oldSide && op.kind == '-' {
			return op.aLine - 1
		}
	}
	return 0
}

func hunkRange(start, count int) string {
	if count == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, count)
}
