package tools

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name, old, new, want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"one line changed", "a\nb\nc\n", "a\nB\nc\n", "--- f (now)\n+++ f (after this call)\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c"},
		{"added at the end", "a\n", "a\nb\n", "--- f (now)\n+++ f (after this call)\n@@ -1 +1,2 @@\n a\n+b"},
		{"from empty", "", "x\ny\n", "--- f (now)\n+++ f (after this call)\n@@ -0,0 +1,2 @@\n+x\n+y"},
		{"to empty", "x\n", "", "--- f (now)\n+++ f (after this call)\n@@ -1 +0,0 @@\n-x"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ntwelve\n",
			"--- f (now)\n+++ f (after this call)\n@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+twelve"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := unifiedDiff("f", tt.old, tt.new, 1<<20)
			if !ok || got != tt.want {
				t.Errorf("diff = %v\n%s\nwant:\n%s", ok, got, tt.want)
			}
		})
	}
}

// TestUnifiedDiffApplies checks random edits: the diff applied to the old text gives the new.
func TestUnifiedDiffApplies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		var old []string
		for range r.IntN(30) {
			old = append(old, strconv.Itoa(r.IntN(6)))
		}
		nw := append([]string(nil), old...)
		for range r.IntN(6) {
			switch i := r.IntN(len(nw) + 1); r.IntN(3) {
			case 0:
				nw = append(nw[:i], append([]string{"new" + strconv.Itoa(r.IntN(4))}, nw[i:]...)...)
			case 1:
				if i < len(nw) {
					nw = append(nw[:i], nw[i+1:]...)
				}
			default:
				if i < len(nw) {
					nw[i] = "changed"
				}
			}
		}
		a, b := strings.Join(old, "\n")+"\n", strings.Join(nw, "\n")+"\n"
		if len(old) == 0 {
			a = ""
		}
		if len(nw) == 0 {
			b = ""
		}
		d, ok := unifiedDiff("f", a, b, 1<<20)
		if !ok {
			t.Fatalf("case %d: no diff", n)
		}
		if got := applyDiff(t, a, d); got != b {
			t.Fatalf("case %d: the diff of\n%q\nand\n%q\nis\n%s\nand gives\n%q", n, a, b, d, got)
		}
	}
}

// applyDiff applies a unified diff to old, checking each kept and removed line.
func applyDiff(t *testing.T, old, diff string) string {
	t.Helper()
	a := diffLines(old)
	var out []string
	next := 0 // the next line of a not yet copied
	if diff == "" {
		return old
	}
	for _, line := range strings.Split(diff, "\n")[2:] {
		switch {
		case strings.HasPrefix(line, "@@"):
			var as, ac, bs, bc int
			if _, err := fmt.Sscanf(normalizeHeader(line), "@@ -%d,%d +%d,%d @@", &as, &ac, &bs, &bc); err != nil {
				t.Fatalf("header %q: %v", line, err)
			}
			if ac == 0 {
				as++ // an empty side names the line before it
			}
			for ; next < as-1; next++ {
				out = append(out, a[next])
			}
		case line[0] == ' ' || line[0] == '-':
			if next >= len(a) || a[next] != line[1:] {
				t.Fatalf("line %q does not match the old text at %d", line, next+1)
			}
			if line[0] == ' ' {
				out = append(out, a[next])
			}
			next++
		case line[0] == '+':
			out = append(out, line[1:])
		}
	}
	out = append(out, a[next:]...)
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

// normalizeHeader writes "-3" as "-3,1" so one format reads every header.
func normalizeHeader(h string) string {
	f := strings.Fields(h)
	for i := 1; i <= 2; i++ {
		if !strings.Contains(f[i], ",") {
			f[i] += ",1"
		}
	}
	return strings.Join(f, " ")
}

func TestUnifiedDiffBounds(t *testing.T) {
	// Two texts with no line in common, each past the table's bound: a summary, not a table
	// of millions of cells.
	var a, b strings.Builder
	for i := range 1100 {
		fmt.Fprintf(&a, "old %d\n", i)
		fmt.Fprintf(&b, "new %d\n", i)
	}
	if d, ok := unifiedDiff("f", a.String(), b.String(), 1<<20); ok {
		t.Errorf("a 1100 by 1100 comparison ran (%d bytes of diff), want it refused", len(d))
	}
	// The same lines around a small change compare however long the file is.
	long := strings.Repeat("same\n", 50000)
	if _, ok := unifiedDiff("f", long+"x\n"+long, long+"y\n"+long, 1<<20); !ok {
		t.Error("a one-line change in a long file was refused")
	}
	// A long diff is cut at a line, and says so.
	d, ok := unifiedDiff("f", "", strings.Repeat("line\n", 1000), 200)
	if !ok || len(d) > 240 || !strings.HasSuffix(d, "more lines)") {
		t.Errorf("cut diff (%d bytes):\n%s", len(d), d)
	}
}

// FuzzUnifiedDiff: for any two texts (a file and what the model would write over it) the
// diff, when not refused for size, applies to the old text and gives the new one.
func FuzzUnifiedDiff(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\n")
	f.Add("", "x")
	f.Add("x\n", "")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "0\n2\n3\n4\n5\n6\n7\n8\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		// Lines end with a break here: the diff does not mark a missing last one.
		if a != "" && !strings.HasSuffix(a, "\n") || b != "" && !strings.HasSuffix(b, "\n") {
			return
		}
		d, ok := unifiedDiff("f", a, b, 1<<30)
		if !ok {
			return
		}
		if got := applyDiff(t, a, d); got != b {
			t.Fatalf("the diff of %q and %q is\n%s\nand gives %q", a, b, d, got)
		}
	})
}
