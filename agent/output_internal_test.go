package agent

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCapOutput pins down what of an output enters the conversation: all of it up to the
// cap, else its head and tail on line breaks when one is near, on UTF-8 boundaries when not,
// around a line that says which bytes were cut.
func TestCapOutput(t *testing.T) {
	lines := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString("line " + strconv.Itoa(i) + " of the listing\n")
		}
		return b.String()
	}
	tests := []struct {
		name       string
		in         string
		limit      int
		head, tail string // what the kept head ends with and the kept tail starts with
	}{
		{name: "under the cap", in: "short", limit: 100},
		{name: "at the cap", in: strings.Repeat("x", 100), limit: 100},
		{name: "off", in: strings.Repeat("x", 1000), limit: 0},
		// 40 lines of 22 to 23 bytes and 100 bytes for each part: the head ends and the tail
		// starts at a line break, four whole lines each.
		{name: "lines", in: lines(40), limit: 200, head: "\nline 3 of the listing\n", tail: "line 36 of the listing\n"},
		// No line break: the cuts fall at the byte limits, moved off the middle of "é".
		{name: "multibyte", in: strings.Repeat("é", 300), limit: 101, head: "é", tail: "é"},
		// The tail's 32 bytes hold the error and the lines before it, from a line's start.
		{name: "an error at the end", in: strings.Repeat("ok\n", 500) + "panic: boom\nexit status 2", limit: 64, head: "ok\n", tail: "ok\nok\npanic: boom\nexit status 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := capOutput(tt.in, tt.limit, "call_7")
			if tt.head == "" {
				if got != tt.in {
					t.Fatalf("capOutput changed an output it need not cut: %q", got)
				}
				return
			}
			h, tl := headTail(tt.in, tt.limit)
			want := tt.in[:h] + capMarker(h, tl, len(tt.in), "call_7") + tt.in[tl:]
			if got != want {
				t.Fatalf("capOutput = %q, want %q", got, want)
			}
			if !strings.HasSuffix(tt.in[:h], tt.head) || !strings.HasPrefix(tt.in[tl:], tt.tail) {
				t.Errorf("kept head ends %q and tail starts %q, want %q and %q", tail(tt.in[:h], 30), head(tt.in[tl:], 30), tt.head, tt.tail)
			}
			if kept := h + len(tt.in) - tl; kept > tt.limit {
				t.Errorf("kept %d bytes, over the cap of %d", kept, tt.limit)
			}
			if !strings.Contains(got, `read_output with call_id "call_7" and offset `+strconv.Itoa(h)) {
				t.Errorf("marker %q does not say how to read the cut bytes", capMarker(h, tl, len(tt.in), "call_7"))
			}
		})
	}
}

// TestOutputCapConfig checks the cap's default, a thirty-second of the budget but never
// under the least a config may set, and that a config cannot set less.
func TestOutputCapConfig(t *testing.T) {
	for _, tt := range []struct{ budget, want int }{{0, 4000}, {12000, 1500}, {1000, minOutputCap}} {
		if got := (Config{ContextTokens: tt.budget}).Defaults().OutputCap; got != tt.want {
			t.Errorf("default cap at a budget of %d = %d, want %d", tt.budget, got, tt.want)
		}
	}
	for _, tt := range []struct {
		cap int
		ok  bool
	}{{-1, true}, {0, true}, {minOutputCap, true}, {minOutputCap - 1, false}, {1, false}} {
		if err := (Config{OutputCap: tt.cap}).Check(); (err == nil) != tt.ok {
			t.Errorf("output_cap %d: Check() = %v, want ok %v", tt.cap, err, tt.ok)
		}
	}
}

func head(s string, n int) string { return s[:min(n, len(s))] }
func tail(s string, n int) string { return s[max(0, len(s)-n):] }

var markerRE = regexp.MustCompile(`\n\[\.\.\. (\d+) bytes cut here, bytes (\d+) to (\d+) of (\d+): read_output with call_id "c" and offset (\d+) shows them \.\.\.\]\n`)

// FuzzCapOutput checks the cut on any input and cap: the head is a prefix and the tail a
// suffix of the input, they keep at most the cap, the marker names exactly the bytes between
// them, and valid UTF-8 stays valid.
func FuzzCapOutput(f *testing.F) {
	f.Add("line one\nline two\nline three\n", 10)
	f.Add(strings.Repeat("日本語のテキスト\n", 40), 77)
	f.Add(strings.Repeat("é", 50), 3)
	f.Add("\xff\xfe broken \xc3", 4)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit < 1 || limit > 1<<16 {
			return
		}
		got := capOutput(s, limit, "c")
		if len(s) <= limit {
			if got != s {
				t.Fatalf("output of %d bytes under a cap of %d changed", len(s), limit)
			}
			return
		}
		m := markerRE.FindStringSubmatchIndex(got)
		if m == nil {
			t.Fatalf("no marker in %q", got)
		}
		num := func(i int) int { n, _ := strconv.Atoi(got[m[2*i]:m[2*i+1]]); return n }
		cut, from, to, total, offset := num(1), num(2), num(3), num(4), num(5)
		if total != len(s) || from != offset || to-from != cut || from != m[0] || from > to {
			t.Fatalf("marker says %d bytes cut, %d to %d of %d, offset %d; the head is %d bytes of %d", cut, from, to, total, offset, m[0], len(s))
		}
		kept := got[m[1]:]
		if got[:from] != s[:from] || kept != s[to:] {
			t.Fatal("head or tail is not the input's")
		}
		if from+len(kept) > limit {
			t.Fatalf("kept %d bytes, over the cap of %d", from+len(kept), limit)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("valid UTF-8 in, invalid out: %q", got)
		}
	})
}
