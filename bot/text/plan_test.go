package text

import "testing"

func TestPlanMark(t *testing.T) {
	tests := []struct {
		status string
		want   Mark
	}{
		{"pending", MarkPending},
		{"in_progress", MarkActive},
		{"done", MarkDone},
		{"failed", MarkFailed},
		{"", MarkPending},
		{"skipped", MarkPending},
		{"DONE", MarkPending},
	}
	for _, tt := range tests {
		if got := PlanMark(tt.status); got != tt.want {
			t.Errorf("PlanMark(%q) = %q, want %q", tt.status, got, tt.want)
		}
	}
}
