package main

import (
	"os"
	"testing"
)

func TestParseMapsLine(t *testing.T) {
	tests := []struct {
		line string
		want mapping
	}{
		{"00400000-00c06000 r-xp 00000000 08:01 1234                               /usr/bin/loop bot",
			mapping{start: 0x400000, end: 0xc06000, offset: 0, path: "/usr/bin/loop bot"}},
		{"01006000-01dde000 r--p 00c06000 fe:01 99 /tmp/x/loopbot (deleted)",
			mapping{start: 0x1006000, end: 0x1dde000, offset: 0xc06000, path: "/tmp/x/loopbot (deleted)"}},
		{"c000000000-c000400000 rw-p 00000000 00:00 0 ",
			mapping{start: 0xc000000000, end: 0xc000400000}},
		{"7ffd1000-7ffd3000 rw-p 00000000 00:00 0                          [stack]",
			mapping{start: 0x7ffd1000, end: 0x7ffd3000, path: "[stack]"}},
	}
	for _, tt := range tests {
		got, err := parseMapsLine(tt.line)
		if err != nil || got != tt.want {
			t.Errorf("parseMapsLine(%q) = %+v, %v, want %+v", tt.line, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "00400000 r-xp 0 08:01 1", "zz-00c06000 r-xp 00000000 08:01 1"} {
		if _, err := parseMapsLine(bad); err == nil {
			t.Errorf("parseMapsLine(%q) succeeded, want an error", bad)
		}
	}
}

// TestResidentPartsOfThisProcess splits the test binary's own resident set: its code and
// function table must be found by page, and the parts must add up to about VmRSS.
func TestResidentPartsOfThisProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Other tests of this package run scenarios in the same process, so the resident set
	// may change while the pages are read. A sample counts only when VmRSS read before and
	// after it agree within 2%.
	for attempt := 0; ; attempt++ {
		before, err := procStatusKB("/proc/self/status", "VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		parts, err := residentKB(os.Getpid(), exe)
		if err != nil {
			t.Fatal(err)
		}
		after, err := procStatusKB("/proc/self/status", "VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) > len(residentParts) {
			t.Fatalf("parts %v, want only %v", parts, residentParts)
		}
		for _, p := range []string{partText, partRodata, partPclntab, partData, partAnon} {
			if parts[p] <= 0 {
				t.Fatalf("%s = %d KB, want some (parts %v)", p, parts[p], parts)
			}
		}
		if d := before - after; (d > before/50 || -d > before/50) && attempt < 50 {
			continue
		}
		var sum int64
		for _, p := range residentParts {
			sum += parts[p]
		}
		lo, hi := min(before, after), max(before, after)
		if raceEnabled && sum > hi {
			t.Logf("parts add up to %d KB, VmRSS is %d KB: the race detector's zero-page shadow is counted only in the parts", sum, hi)
			return
		}
		if sum < lo*9/10 || sum > hi*11/10 {
			t.Errorf("parts add up to %d KB, VmRSS is %d..%d KB (parts %v)", sum, lo, hi, parts)
		}
		return
	}
}
