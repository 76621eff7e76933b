package agent

import (
	"strings"
	"testing"
)

func TestLastFailure(t *testing.T) {
	long := strings.Repeat("é", 400)
	tests := []struct {
		name  string
		calls []CallRecord
		want  string
	}{
		{"none failed", []CallRecord{{Name: "a", Status: CallSucceeded}}, ""},
		{"the latest failure", []CallRecord{
			{Name: "a", Status: CallFailed, Error: "first"},
			{Name: "shell", Status: CallFailed, Error: "exit status 2:\n  no such file."},
			{Name: "b", Status: CallSucceeded},
		}, "Last failure: shell: exit status 2: no such file."},
		{"an invalid call", []CallRecord{{Name: "x", Status: CallInvalid, Error: `unknown tool "x"`}}, `Last failure: x: unknown tool "x".`},
		{"no message", []CallRecord{{Name: "y", Status: CallUnknown}}, "Last failure: y: no error message."},
		{"clipped", []CallRecord{{Name: "z", Status: CallFailed, Error: long}}, "Last failure: z: " + long[:maxFailureShown] + "…."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &State{Calls: tt.calls}
			if got := st.lastFailure(); got != tt.want {
				t.Errorf("lastFailure() = %q, want %q", got, tt.want)
			}
			if tt.want != "" && !strings.HasSuffix(st.Summary(), tt.want) {
				t.Errorf("Summary() = %q, does not end with the failure", st.Summary())
			}
		})
	}
}
