package agent

import (
	"errors"
	"testing"
)

func TestCheckSteps(t *testing.T) {
	st := func(id string, deps ...string) PlanStep {
		return PlanStep{ID: id, Description: "do " + id, Scope: ScopeFull, DependsOn: deps}
	}
	tests := []struct {
		name  string
		steps []PlanStep
		done  map[string]bool
		ok    bool
	}{
		{"chain", []PlanStep{st("a"), st("b", "a"), st("c", "a", "b")}, nil, true},
		{"diamond", []PlanStep{st("a"), st("b", "a"), st("c", "a"), st("d", "b", "c")}, nil, true},
		{"on a done step", []PlanStep{st("b", "a")}, map[string]bool{"a": true}, true},
		{"no steps", nil, nil, false},
		{"unknown dependency", []PlanStep{st("a"), st("b", "x")}, nil, false},
		{"self", []PlanStep{st("a", "a")}, nil, false},
		{"cycle of three", []PlanStep{st("a", "c"), st("b", "a"), st("c", "b")}, nil, false},
		{"cycle behind a root", []PlanStep{st("r"), st("a", "r", "b"), st("b", "a")}, nil, false},
		{"repeated id", []PlanStep{st("a"), st("a")}, nil, false},
		{"takes a done id", []PlanStep{st("a")}, map[string]bool{"a": true}, false},
		{"no description", []PlanStep{{ID: "a", Scope: ScopeFull}}, nil, false},
		{"unknown scope", []PlanStep{{ID: "a", Description: "x", Scope: "root"}}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSteps(tt.steps, tt.done)
			if (err == nil) != tt.ok || err != nil && !errors.Is(err, errPlan) {
				t.Fatalf("checkSteps = %v, want ok %v", err, tt.ok)
			}
		})
	}
}
