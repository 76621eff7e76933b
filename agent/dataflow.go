package agent

import (
	"fmt"
	"strings"
)

// The data-flow guard stops the "lethal trifecta": a run that has read outside content (a
// web page, a result of an MCP server that is not trusted) may have been told by it to send
// what the run can see (files, tokens, the conversation) somewhere. Once a run is exposed,
// every call that can carry data out needs a person's approval, and its card says why; a call
// whose arguments hold a secret is refused outright, before and after exposure, approvable by
// no one. A call the goal itself asked for (a host the goal names, with nothing of the
// model's choosing attached) is not held.

// SecretScan reports whether text holds a secret: a configured value or a match of the
// redactor's rules. The command wires it from the bot's redactor, so the agent needs no rule
// set of its own.
type SecretScan func(text string) bool

// WithSecretScan sets the check that refuses calls carrying a secret out of the run.
func WithSecretScan(scan SecretScan) Option { return func(a *Agent) { a.secrets = scan } }

// guardFlow applies the data-flow rules to a call's assessment. refuse is set when the call
// must not run at all.
func (r *runner) guardFlow(tc ToolCall, as Assessment) (out Assessment, refuse string) {
	if as.Sends == "" {
		return as, ""
	}
	if r.a.secrets != nil && r.a.secrets(tc.Arguments) {
		return as, fmt.Sprintf("the arguments of %s contain a secret and the call could send them to %s; "+
			"it was refused and cannot be approved. Do not send secrets anywhere", tc.Name, as.Sends)
	}
	st := r.st
	if !r.flowHolds(as) {
		return as, ""
	}
	if as.Risk < RiskConfirm {
		as.Risk = RiskConfirm
	}
	as.Reason = fmt.Sprintf("this run has read %s; this call would send data to %s", st.Exposed, as.Sends)
	return as, ""
}

// flowHolds reports whether the guard holds a call with this assessment for a person: the
// run is exposed and the call can carry data somewhere the goal did not name. No grant
// covers such a call (grant.go).
func (r *runner) flowHolds(as Assessment) bool {
	return as.Sends != "" && r.st.Exposed != "" && (as.Carries || !namedIn(r.st.Goal, as.Sends))
}

// exposeBy marks the run exposed by a call that ran and brought outside content in.
func (r *runner) exposeBy(c *CallRecord) {
	if c.Reads != "" && r.st.Exposed == "" && (c.Status == CallSucceeded || c.Status == CallFailed) {
		r.st.Exposed = c.Reads
	}
}

// namedIn reports whether the goal names host (case-insensitively).
func namedIn(goal, host string) bool {
	return host != "" && strings.Contains(strings.ToLower(goal), strings.ToLower(host))
}
