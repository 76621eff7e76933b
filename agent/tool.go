package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Risk is how careful the loop must be with one tool call. Levels are ordered: a config may
// raise a tool's level, never lower it.
type Risk int

// Risk levels, from harmless to needing a second person.
const (
	// RiskSafe calls run without asking.
	RiskSafe Risk = iota + 1
	// RiskCautious calls run unless policy or low momentum says confirm.
	RiskCautious
	// RiskConfirm calls need one approval.
	RiskConfirm
	// RiskDangerous calls need an approval, from someone other than the requester where
	// configured.
	RiskDangerous
)

var riskNames = map[Risk]string{RiskSafe: "safe", RiskCautious: "cautious", RiskConfirm: "confirm", RiskDangerous: "dangerous"}

func (r Risk) String() string {
	if s, ok := riskNames[r]; ok {
		return s
	}
	return fmt.Sprintf("risk(%d)", int(r))
}

// ParseRisk reads a risk level by name.
func ParseRisk(s string) (Risk, error) {
	for r, name := range riskNames {
		if name == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("unknown risk level %q (want safe, cautious, confirm or dangerous)", s)
}

// MarshalText writes the level's name, so saved runs and configs read as words.
func (r Risk) MarshalText() ([]byte, error) {
	if _, ok := riskNames[r]; !ok {
		return nil, fmt.Errorf("invalid risk %d", int(r))
	}
	return []byte(r.String()), nil
}

// UnmarshalText reads a level's name.
func (r *Risk) UnmarshalText(b []byte) error {
	v, err := ParseRisk(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Assessment is the risk of one particular call, with the reason a person sees on the
// approval card.
type Assessment struct {
	Risk   Risk
	Reason string
	// Reads names the outside source a call brings into the run (a URL, an MCP server that
	// is not trusted). Once such a call has run, the run is exposed (dataflow.go).
	Reads string
	// Sends names where a call can carry data out of the run (a host, "the network", an MCP
	// server); empty when it cannot.
	Sends string
	// Carries is set when the call carries data of the model's choosing to Sends (a query
	// string, headers, a body, a command with network access), not only a request for a
	// named address.
	Carries bool
}

// ToolInfo describes a tool to the loop: the spec the model sees and how the loop may run it.
type ToolInfo struct {
	Spec ToolSpec
	// ReadOnly calls change nothing, so the calls of one step that are all read-only run in
	// parallel.
	ReadOnly bool
	// Idempotent calls may be re-run when a crash left their outcome unknown.
	Idempotent bool
	// Timeout bounds one call; zero takes the loop's default.
	Timeout time.Duration
	// Untrusted tools return content from outside loopbot (web pages, files, command output,
	// MCP results): the model sees it between the run's untrusted markers.
	Untrusted bool
	// Executes marks a tool that runs programs (shell): the autonomy levels' "confirm shell
	// commands" knob applies to its cautious calls.
	Executes bool
}

// Invocation is one call of a tool, with what the tool may need to know about its run.
type Invocation struct {
	RunID  string
	CallID string
	// Args are the call's arguments, already checked to be a JSON object that matches the
	// tool's schema.
	Args json.RawMessage
}

// Tool is something the model can do. Tools are safe for concurrent use.
type Tool interface {
	Info() ToolInfo
	// Assess judges one call before it runs; args match the tool's schema.
	Assess(args json.RawMessage) Assessment
	// Call runs the tool. Its error goes back to the model as the call's result, so it should
	// say what went wrong in words the model can act on.
	Call(ctx context.Context, inv Invocation) (string, error)
}
