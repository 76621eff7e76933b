package agent

import (
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestSystemTextFollowsTheState checks that the system text, built once and kept, is built
// again whenever what it shows changes: the goal, the nonce of the untrusted markers, a
// pinned fact added, or one changed in place.
func TestSystemTextFollowsTheState(t *testing.T) {
	ag, err := New(Config{}, nopModel{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := NewState("run-1", "find the bug", nil, time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC))
	st.Nonce = "n1"
	st.Pinned = []string{"the build uses make"}
	r := &runner{a: ag, st: st}
	first := r.systemText()
	if again := r.systemText(); unsafe.StringData(again) != unsafe.StringData(first) {
		t.Error("the system text was built again for the same state")
	}
	changes := []struct {
		name   string
		change func()
		want   string
	}{
		{"the goal", func() { st.Goal = "fix the bug" }, "Goal: fix the bug"},
		{"the nonce", func() { st.Nonce = "n2" }, openMarker("n2")},
		{"a fact added", func() { st.Pinned = append(st.Pinned, "tests need docker") }, "tests need docker"},
		{"a fact changed in place", func() { st.Pinned[0] = "the build uses bazel" }, "the build uses bazel"},
	}
	for _, c := range changes {
		c.change()
		if got := r.systemText(); !strings.Contains(got, c.want) {
			t.Errorf("after %s the system text does not show %q:\n%s", c.name, c.want, got)
		}
	}
	if got, want := r.systemText(), r.buildSystemText(); got != want {
		t.Errorf("kept system text differs from one built afresh:\n got %s\nwant %s", got, want)
	}
}
