package agent

import (
	"slices"
	"strings"
)

// A run may be limited to some of the agent's tools (State.AllowedTools: a playbook's
// allowed tools). It is an allowlist: the model is offered only those and the loop's own
// control tools, and a call of any other tool is refused before it is assessed, so no
// approval can let it run either.

// allowedTool reports whether the run may call the tool name.
func (r *runner) allowedTool(name string) bool {
	allowed := r.st.AllowedTools
	return allowed == nil || name == updatePlanName || name == askUserName || name == askPlannerName || name == readOutputName || slices.Contains(allowed, name)
}

// specs are the tool specs the model is offered in this run.
func (r *runner) specs() []ToolSpec {
	if r.st.AllowedTools == nil {
		return r.a.specs
	}
	out := make([]ToolSpec, 0, len(r.st.AllowedTools)+2)
	for _, s := range r.a.specs {
		if r.allowedTool(s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// notAllowed is what the model is told of a call of a tool the run may not use.
func (r *runner) notAllowed(name string) string {
	return name + " is not among the tools this run may use (" + strings.Join(r.st.AllowedTools, ", ") +
		"); do the work with those, or say what you could not do"
}

// ToolNames lists the names of the agent's tools, control tools included, sorted.
func (a *Agent) ToolNames() []string { return a.toolNames() }

// ceiling is l, or the run's playbook level when that asks more (State.PlaybookLevel): a
// playbook may make its runs more careful than their channel, never bolder.
func (r *runner) ceiling(l Level) Level { return capLevel(l, r.st.PlaybookLevel) }

// capLevel is l, or c when c is a level that asks more.
func capLevel(l, c Level) Level {
	if validLevel(c) && slices.Index(Levels, c) < slices.Index(Levels, l) {
		return c
	}
	return l
}
