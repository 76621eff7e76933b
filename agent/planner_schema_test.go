package agent

import "testing"

// TestPlannerSchemasCompile compiles the planner's schemas, which production compiles on a
// planned run's first use: a broken literal fails here, not in the first planned run.
func TestPlannerSchemasCompile(t *testing.T) {
	for name, s := range map[string]func() *schema{
		"decide": decideSchema, "answer": answerSchema, "review": reviewSchema, "ask_planner": askPlannerSchema,
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s schema: %v", name, r)
				}
			}()
			if s() == nil {
				t.Errorf("%s schema compiled to nil", name)
			}
		}()
	}
}
