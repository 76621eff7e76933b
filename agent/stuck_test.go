package agent

import "testing"

func TestCycle(t *testing.T) {
	tests := []struct {
		recent []string
		times  int
		want   int
	}{
		{[]string{"a", "b", "a", "b", "a", "b"}, 3, 2},
		{[]string{"x", "a", "b", "a", "b", "a", "b"}, 3, 2},
		{[]string{"a", "b", "a", "b", "a"}, 3, 0},
		{[]string{"a", "b", "c", "a", "b", "c", "a", "b", "c"}, 3, 3},
		{[]string{"a", "a", "a", "a", "a", "a"}, 3, 0}, // a plain repeat: RepeatedCall's
		{[]string{"a", "b", "a", "c", "a", "b"}, 3, 0},
		{[]string{"a", "b", "a", "b"}, 2, 2},
		{nil, 3, 0},
	}
	for _, tt := range tests {
		if got := cycle(tt.recent, tt.times); got != tt.want {
			t.Errorf("cycle(%v, %d) = %d, want %d", tt.recent, tt.times, got, tt.want)
		}
	}
}

func TestAsksQuestion(t *testing.T) {
	tests := []struct {
		text string
		want bool
	}{
		{"Which database should I use: staging or production?", true},
		{"I found two configs.\n\n**Which one should I deploy?**", true},
		{"Done. The report is in report.md.", false},
		{"Is it done? Yes: the tests pass.", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := asksQuestion(tt.text); got != tt.want {
			t.Errorf("asksQuestion(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}
