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

// FuzzPlannerReply feeds the planner's reply parser what a model may send: it must never
// panic, and a plan it accepts has checked steps.
func FuzzPlannerReply(f *testing.F) {
	f.Add(`{"needs_plan": true, "steps": [{"id": "a", "description": "x", "scope": "full", "depends_on": ["b"]}, {"id": "b", "description": "y", "scope": "read_only"}]}`)
	f.Add(`{"needs_plan": true, "steps": [{"id": "a", "description": "x", "scope": "full", "depends_on": ["a"]}]}`)
	f.Add(`Sure! {"needs_plan": false} hope that helps }`)
	f.Add(`{"needs_plan": true, "steps": [{"id": "", "description": "", "scope": "root"}]}`)
	f.Add(`{{{`)
	f.Fuzz(func(t *testing.T, reply string) {
		var out struct {
			NeedsPlan bool       `json:"needs_plan"`
			Steps     []stepSpec `json:"steps"`
		}
		err := decodePlannerReply(reply, decideSchema(), &out, func() error {
			if !out.NeedsPlan {
				return nil
			}
			return checkSteps(specSteps(out.Steps), nil)
		})
		if err == nil && out.NeedsPlan {
			if len(out.Steps) == 0 || len(out.Steps) > maxPlanSteps {
				t.Fatalf("accepted a plan of %d steps", len(out.Steps))
			}
		}
	})
}
